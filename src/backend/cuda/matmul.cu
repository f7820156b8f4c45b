// y[M, N] = x[M, K] · w[N, K]ᵀ with f32 weights, f32 accumulation, on CUDA cores (the parity path:
// exact f32 products): MatmulKernel::CudaCoreF32. bf16 weights go to the tensor cores
// (matmul_tensor_core.cu, with its own numerics contract: x rounded to bf16); the kernel below still
// accepts them (BF16 = true) but nothing launches it for them.
//
// Reduction order (row invariance, ops.h): every output element y[m, n] is computed by one warp the
// same way whatever M, the tile shape or the grid:
//   - K is cut into chunks of 8 consecutive elements; lane l (0..31) owns chunks l, l + 32, l + 64, ...
//     (elements [8 (l + 32 i), 8 (l + 32 i) + 8)), and accumulates them into ONE f32 accumulator with
//     fmaf in increasing k (elements past K are skipped);
//   - the 32 lane partials are then summed by the fixed xor butterfly of warp_sum (16, 8, 4, 2, 1).
// A warp computes a tile of TM rows x NC columns; the tile only decides which independent
// accumulators one weight load feeds (the weight chunk is loaded once and used for the TM rows), never
// the order inside one accumulator. The 16-byte (vector) and scalar load paths perform the same fmaf
// sequence, so operand alignment does not change bits either.
#include <cuda_runtime.h>

#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"

namespace specserve::cuda::kernels {

namespace {

constexpr int kWarps = 4;  // warps per block
constexpr int kChunk = 8;  // K elements per lane per step

// Loads the 8 weights of chunk k0 of weight row `row` (elements past K read as 0 and are not used).
template <bool BF16, bool VEC>
__device__ __forceinline__ void load_w(const void* w, int64_t ldw, int64_t row, int64_t k0, int64_t K,
                                       float (&out)[8]) {
  if constexpr (BF16) {
    const uint16_t* p = static_cast<const uint16_t*>(w) + row * ldw + k0;
    if constexpr (VEC) {
      const uint4 v = __ldg(reinterpret_cast<const uint4*>(p));
      out[0] = bf16_lo(v.x), out[1] = bf16_hi(v.x), out[2] = bf16_lo(v.y), out[3] = bf16_hi(v.y);
      out[4] = bf16_lo(v.z), out[5] = bf16_hi(v.z), out[6] = bf16_lo(v.w), out[7] = bf16_hi(v.w);
    } else {
#pragma unroll
      for (int e = 0; e < kChunk; ++e) out[e] = k0 + e < K ? bf16_to_f32(p[e]) : 0.0f;
    }
  } else {
    const float* p = static_cast<const float*>(w) + row * ldw + k0;
    if constexpr (VEC) {
      const float4 a = __ldg(reinterpret_cast<const float4*>(p));
      const float4 b = __ldg(reinterpret_cast<const float4*>(p + 4));
      out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w, out[4] = b.x, out[5] = b.y, out[6] = b.z, out[7] = b.w;
    } else {
#pragma unroll
      for (int e = 0; e < kChunk; ++e) out[e] = k0 + e < K ? p[e] : 0.0f;
    }
  }
}

template <bool VEC>
__device__ __forceinline__ void load_x(const float* p, int64_t k0, int64_t K, float (&out)[8]) {
  if constexpr (VEC) {
    const float4 a = *reinterpret_cast<const float4*>(p);
    const float4 b = *reinterpret_cast<const float4*>(p + 4);
    out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w, out[4] = b.x, out[5] = b.y, out[6] = b.z, out[7] = b.w;
  } else {
#pragma unroll
    for (int e = 0; e < kChunk; ++e) out[e] = k0 + e < K ? p[e] : 0.0f;
  }
}

template <int TM, int NC, bool BF16, bool VEC>
__global__ void __launch_bounds__(kWarps * 32) matmul_kernel(MatmulArgs a) {
  pdl_begin();
  const int lane = threadIdx.x & 31;
  const int64_t n0 = (int64_t{blockIdx.x} * kWarps + (threadIdx.x >> 5)) * NC;
  if (n0 >= a.N) return;  // whole warp leaves together
  for (int64_t m0 = int64_t{blockIdx.y} * TM; m0 < a.M; m0 += int64_t{gridDim.y} * TM) {
    float acc[TM][NC];
#pragma unroll
    for (int r = 0; r < TM; ++r)
#pragma unroll
      for (int c = 0; c < NC; ++c) acc[r][c] = 0.0f;
    for (int64_t k0 = int64_t{lane} * kChunk; k0 < a.K; k0 += 32 * kChunk) {
      float wv[NC][kChunk];
#pragma unroll
      for (int c = 0; c < NC; ++c) {
        if (n0 + c < a.N)
          load_w<BF16, VEC>(a.w, a.ldw, n0 + c, k0, a.K, wv[c]);
        else
#pragma unroll
          for (int e = 0; e < kChunk; ++e) wv[c][e] = 0.0f;
      }
#pragma unroll
      for (int r = 0; r < TM; ++r) {
        if (m0 + r >= a.M) break;
        float xv[kChunk];
        load_x<VEC>(a.x + (m0 + r) * a.ldx + k0, k0, a.K, xv);
        const int ne = VEC ? kChunk : static_cast<int>(a.K - k0 < kChunk ? a.K - k0 : kChunk);
#pragma unroll
        for (int c = 0; c < NC; ++c)
#pragma unroll
          for (int e = 0; e < kChunk; ++e)
            if (VEC || e < ne) acc[r][c] = fmaf(xv[e], wv[c][e], acc[r][c]);
      }
    }
#pragma unroll
    for (int r = 0; r < TM; ++r)
#pragma unroll
      for (int c = 0; c < NC; ++c) {
        const float s = warp_sum(acc[r][c]);
        if (lane == 0 && m0 + r < a.M && n0 + c < a.N) a.y[(m0 + r) * a.ldy + n0 + c] = s;
      }
  }
}

template <int TM, int NC, bool BF16>
void launch(const MatmulArgs& a, bool vec, cudaStream_t stream) {
  const int64_t cols_per_block = int64_t{kWarps} * NC;
  const dim3 grid(static_cast<unsigned>((a.N + cols_per_block - 1) / cols_per_block),
                  static_cast<unsigned>(std::min<int64_t>((a.M + TM - 1) / TM, 65535)));
  if (vec)
    launch_pdl(matmul_kernel<TM, NC, BF16, true>, grid, kWarps * 32, 0, stream, a);
  else
    launch_pdl(matmul_kernel<TM, NC, BF16, false>, grid, kWarps * 32, 0, stream, a);
  CUDA_CHECK_LAUNCH();
}

template <bool BF16>
void dispatch_tm(const MatmulArgs& a, bool vec, cudaStream_t stream) {
  if (a.M == 1)
    launch<1, 2, BF16>(a, vec, stream);
  else if (a.M <= 4)
    launch<4, 2, BF16>(a, vec, stream);
  else
    launch<8, 2, BF16>(a, vec, stream);
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace

void matmul(const MatmulArgs& a, cudaStream_t stream) { matmul_run(&a, 1, MatmulOrder::RowInvariant, stream); }

void matmul_zero(const MatmulArgs& a, cudaStream_t stream) {
  flush_launches();  // the memset comes after the kernels recorded before it
  CUDA_CHECK(cudaMemset2DAsync(a.y, static_cast<size_t>(a.ldy) * 4, 0, static_cast<size_t>(a.N) * 4,
                               static_cast<size_t>(a.M), stream));
}

void matmul_f32(const MatmulArgs& a, cudaStream_t stream) {
  // 16-byte loads need every chunk start aligned: K a multiple of 8, aligned bases and row strides.
  const bool x_ok = a.K % kChunk == 0 && aligned16(a.x) && (a.M == 1 || a.ldx % 4 == 0);
  const bool w_ok = a.K % kChunk == 0 && aligned16(a.w) && (a.N == 1 || a.ldw % (a.w_bf16 ? 8 : 4) == 0);
  dispatch_tm<false>(a, x_ok && w_ok, stream);
}

}  // namespace specserve::cuda::kernels
