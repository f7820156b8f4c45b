// y[M, N] = x[M, K] · w[N, K]ᵀ for bf16 weights on the tensor cores (mma.sync m16n8k16, sm_80+), f32
// activations in and out. One kernel template serves every M (decode M = 1, verify M <= 256, prefill
// M in the thousands); only the CTA tile shape changes with M (matmul_tensor_core.cuh).
//
// NUMERICS CONTRACT (row invariance, design.md §1, ops.h: a row's bits never depend on M):
//   - x is rounded to bf16 element by element, round to nearest even (cvt.rn.bf16x2.f32), as the CPU
//     AVX512-BF16 kernel rounds activations once per call. The kernel rounds while it builds the A
//     fragments from the f32 copy of x in shared memory, so an element's rounding is the same in every
//     tile shape. (A NaN stays a NaN; the bf16 weights are used as they are.)
//   - Each y[m, n] is ONE f32 accumulator, starting at +0, fed by one
//     mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 per k16 chunk, chunks 0, 1, ..., ceil(K/16) - 1
//     in increasing k; chunk c holds k = 16c + s in mma k-slot s, and the K tail of the last chunk is
//     zero in both operands. No chunk past the last is ever issued (even an all-zero mma could turn a
//     -0 into +0). K is not split (S = 1), so there are no partial sums to combine.
//   - What may depend on M (and N): the CTA tile (rows x columns per CTA and per warp), the pipeline
//     depth, the raster order, the 16-byte vs scalar load paths (bit copies into the same shared-memory
//     image), and which fragment row (0..15) a row of x occupies. The last one relies on the tensor core
//     computing each output element from its own A row, B column and C element alone, the same way in
//     every fragment position; tests/backend_cuda/test_cuda_matmul_tensor_core.cpp checks the bits.
//
// The pipeline: a CTA owns one BM x BN output tile (grid-stride over tiles in tile_of order) and streams
// K through kStages shared-memory stages with cp.async (16-byte pieces, zero-filled past K / N; the
// weights bypass L1). Each k16 chunk, a warp builds its A fragments (two f32 -> one bf16 pair per
// register), ldmatrix's its B fragments and issues WarpM16 x WarpN8 mma.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <climits>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/matmul_tensor_core.cuh"

namespace specserve::cuda::kernels {

namespace {

using namespace specserve::cuda::tc;

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte async copy, of which the first `bytes` come from global memory and the rest is zero. .ca
// keeps x in L1 (every warp of the CTA and the CTAs beside it read the same rows); .cg streams w.
__device__ __forceinline__ void cp_async_ca(uint32_t dst, const void* src, int bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}
__device__ __forceinline__ void cp_async_cg(uint32_t dst, const void* src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr)
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x2(uint32_t addr, uint32_t& r0, uint32_t& r1) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r0), "=r"(r1)
               : "r"(addr)
               : "memory");
}

// d += a · b for one 16 x 8 x 16 step (d: c0 c1 c2 c3 of the C fragment).
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two adjacent f32 -> one register of two bf16, round to nearest even; the lower k in the low half.
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

template <class T>
__global__ void __launch_bounds__(T::kThreads) matmul_tc_kernel(const Params p) {
  extern __shared__ __align__(128) unsigned char smem[];
  const Layout<T> lay{p.a_rows};
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int wm = warp / T::kWarpsN, wn = warp % T::kWarpsN;
  const uint32_t sbase = smem_addr(smem);
  constexpr int kChunks = T::kKT / kMmaK;

  auto cp16_x = [&](int off, const float* src, int bytes) { cp_async_ca(sbase + off, src, bytes); };
  auto cp16_w = [&](int off, const uint16_t* src, int bytes) { cp_async_cg(sbase + off, src, bytes); };
  auto st_f32 = [&](int off, float v) { *reinterpret_cast<float*>(smem + off) = v; };
  auto st_b16 = [&](int off, uint16_t v) { *reinterpret_cast<uint16_t*>(smem + off) = v; };
  auto cvt2 = [&](int off) {
    const float2 v = *reinterpret_cast<const float2*>(smem + off);
    return pack_bf16x2(v.x, v.y);
  };

  const int64_t tiles = p.nbm * p.nbn;
  for (int64_t pid = blockIdx.x; pid < tiles; pid += gridDim.x) {
    const TileId t = tile_of(pid, p.nbm, p.nbn, p.group);
    const int64_t m0 = t.mb * T::kBM, n0 = t.nb * T::kBN;
    const int valid_rows = p.M - m0 < T::kBM ? static_cast<int>(p.M - m0) : T::kBM;

    float acc[T::kWarpM16][T::kWarpN8][4];
#pragma unroll
    for (int i = 0; i < T::kWarpM16; ++i)
#pragma unroll
      for (int j = 0; j < T::kWarpN8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

#pragma unroll 1
    for (int s = 0; s < T::kStages - 1; ++s) {
      if (s < p.ktiles) load_stage<T>(p, lay, s, m0, n0, s, tid, cp16_x, cp16_w, st_f32, st_b16);
      cp_async_commit();
    }
    for (int64_t kt = 0; kt < p.ktiles; ++kt) {
      cp_async_wait<T::kStages - 2>();  // this thread's copies of tile kt have landed
      __syncthreads();                  // everyone's have, and everyone is done with tile kt - 1's stage
      const int64_t next = kt + T::kStages - 1;
      if (next < p.ktiles)
        load_stage<T>(p, lay, static_cast<int>(next % T::kStages), m0, n0, next, tid, cp16_x, cp16_w, st_f32, st_b16);
      cp_async_commit();

      const int stage = static_cast<int>(kt % T::kStages);
      const int64_t chunk0 = kt * kChunks;
      if (!m16_active<T>(wm, 0, valid_rows)) continue;  // a warp below the tile's last row: nothing to do
#pragma unroll
      for (int kk = 0; kk < kChunks; ++kk) {
        if (chunk0 + kk >= p.chunks) break;  // never an mma past the last chunk
        uint32_t b[T::kWarpN8][2];
#pragma unroll
        for (int j = 0; j < T::kWarpN8; j += 2) {
          if (j + 1 < T::kWarpN8)
            ldmatrix_x4(sbase + b_ldsm_off<T>(lay, stage, lane, wn, j, kk, true), b[j][0], b[j][1], b[j + 1][0],
                        b[j + 1][1]);
          else
            ldmatrix_x2(sbase + b_ldsm_off<T>(lay, stage, lane, wn, j, kk, false), b[j][0], b[j][1]);
        }
#pragma unroll
        for (int i = 0; i < T::kWarpM16; ++i) {
          if (!m16_active<T>(wm, i, valid_rows)) continue;
          uint32_t a[4];
          gather_a<T>(lay, stage, lane, wm, i, kk, valid_rows, a, cvt2);
#pragma unroll
          for (int j = 0; j < T::kWarpN8; ++j) mma_bf16(acc[i][j], a, b[j][0], b[j][1]);
        }
      }
    }
    store_tile<T>(p, m0, n0, lane, wm, wn, acc);
    __syncthreads();  // the next tile's prologue refills stages other warps may still be reading
  }
}

int sm_count() {
  static const int n = [] {
    int dev = 0, v = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev));
    return v;
  }();
  return n;
}

template <class T>
void launch(const MatmulArgs& a, cudaStream_t stream) {
  static_assert(Layout<T>{T::kBM}.smem_bytes() <= 227 * 1024, "more shared memory than an sm_90 block may have");
  // Once per kernel: allow the largest layout (a_rows = BM) and prefer shared memory over L1.
  static const bool configured = [] {
    CUDA_CHECK(cudaFuncSetAttribute(matmul_tc_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    Layout<T>{T::kBM}.smem_bytes()));
    CUDA_CHECK(cudaFuncSetAttribute(matmul_tc_kernel<T>, cudaFuncAttributePreferredSharedMemoryCarveout,
                                    cudaSharedmemCarveoutMaxShared));
    return true;
  }();
  (void)configured;
  const Params p = make_params<T>(a.x, a.ldx, static_cast<const uint16_t*>(a.w), a.ldw, a.y, a.ldy, a.M, a.N, a.K);
  const int64_t tiles = p.nbm * p.nbn;
  const unsigned grid = static_cast<unsigned>(tiles < INT_MAX ? tiles : INT_MAX);
  matmul_tc_kernel<T><<<grid, T::kThreads, Layout<T>{p.a_rows}.smem_bytes(), stream>>>(p);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void matmul_bf16_tensor_core(const MatmulArgs& a, cudaStream_t stream, int tile) {
  if (a.M <= 0 || a.N <= 0 || a.K <= 0) return;  // matmul() handles K == 0 (y = 0)
  const TileKind kind =
      tile >= 0 && tile < kTileKinds ? static_cast<TileKind>(tile) : choose_tile(a.M, a.N, sm_count());
  switch (kind) {
    case TileKind::M16: return launch<TileM16>(a, stream);
    case TileKind::M16N8: return launch<TileM16N8>(a, stream);
    case TileKind::M32: return launch<TileM32>(a, stream);
    case TileKind::M64N32: return launch<TileM64N32>(a, stream);
    case TileKind::M64N64: return launch<TileM64N64>(a, stream);
    case TileKind::M128N64: return launch<TileM128N64>(a, stream);
    case TileKind::M128: return launch<TileM128>(a, stream);
  }
}

}  // namespace specserve::cuda::kernels
