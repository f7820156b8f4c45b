// The W8A8 prefill GEMM's pre-pass (matmul_prefill_fp8_sm90a.cu): x [M, K] (f32, row stride ldx) quantised to
// e4m3 per row and group of 128 columns by the rule of matmul_fp8_act_math.cuh, into
//   codes  [M, pitch] bytes (pitch = code_pitch(K), a multiple of 16: the GEMM's TMA row stride; the bytes from K
//          up to the group's end are +0 codes, those past that are not written), in the fragment order of the
//          weight's codes (fp8_code_order.h: a whole 16-column group permuted, a group cut by K as it is), so
//          that the GEMM's k-th products pair the same columns,
//   scales [groups_of(K), scale_pitch(M)] f32, transposed (group g's scales of rows m0 .. m0 + 127 are one
//          512-byte TMA box of the GEMM's stage).
// One warp per (row, group): lane l holds columns 128 g + 4 l .. + 3 (one 16-byte load where x allows it), the
// group's largest magnitude by a warp max (exact and order-free: the result does not depend on the reduction's
// shape), then four divisions and two cvt.rn.satfinite.e4m3x2.f32. Row-local: no value crosses rows. The pass
// moves M K (4 + 1) bytes; at M = 4096, K = 4096 about 84 MB (~20 µs on an H200), the price of the fp8 GEMM
// reading 1-byte activations.
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/fp8_code_order.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/matmul_fp8_act_math.cuh"

namespace specserve::cuda::kernels {

namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ uint32_t cvt_e4m3x2(float lo, float hi) {
  return static_cast<uint32_t>(__nv_cvt_float2_to_fp8x2(make_float2(lo, hi), __NV_SATFINITE, __NV_E4M3));
}

__global__ void __launch_bounds__(kThreads)
    fp8_act_quant_kernel(const float* x, int64_t ldx, int64_t M, int64_t K, bool vec, uint8_t* codes, int64_t pitch,
                         float* scales, int64_t scale_pitch) {
  pdl_begin();
  const int lane = static_cast<int>(threadIdx.x & 31u);
  const int64_t groups = fp8a::groups_of(K), units = M * groups;
  const int64_t warps = int64_t{gridDim.x} * (kThreads / 32);
  for (int64_t u = int64_t{blockIdx.x} * (kThreads / 32) + threadIdx.x / 32; u < units; u += warps) {
    const int64_t m = u / groups, g = u % groups;
    const int64_t k = g * fp8a::kGroup + 4 * lane;
    const float* xr = x + m * ldx;
    float v[4];
    if (vec && k + 3 < K) {
      const float4 q = *reinterpret_cast<const float4*>(xr + k);
      v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
    } else {
#pragma unroll
      for (int e = 0; e < 4; ++e) v[e] = k + e < K ? xr[k + e] : 0.0f;
    }
    float amax = fmaxf(fmaxf(fabsf(v[0]), fabsf(v[1])), fmaxf(fabsf(v[2]), fabsf(v[3])));
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const float s = fp8a::group_scale(amax);
    const uint32_t lo = cvt_e4m3x2(__fdiv_rn(v[0], s), __fdiv_rn(v[1], s));
    const uint32_t hi = cvt_e4m3x2(__fdiv_rn(v[2], s), __fdiv_rn(v[3], s));
    uint8_t* row = codes + m * pitch;
    if (fp8o::whole_group(k, K)) {  // the weight's fragment order (fp8_code_order.h): the pairs k, k + 2 apart
      *reinterpret_cast<uint16_t*>(row + fp8o::stored_index(k, K)) = static_cast<uint16_t>(lo);
      *reinterpret_cast<uint16_t*>(row + fp8o::stored_index(k + 2, K)) = static_cast<uint16_t>(hi);
    } else if (k < pitch) {
      *reinterpret_cast<uint32_t*>(row + k) = lo | (hi << 16);
    }
    if (lane == 0) scales[g * scale_pitch + m] = s;
  }
}

}  // namespace

void fp8_quantize_activations_into(const float* x, int64_t ldx, int64_t M, int64_t K, uint8_t* codes, int64_t pitch,
                                   float* scales, int64_t scale_pitch, cudaStream_t stream) {
  if (M <= 0 || K <= 0) return;
  if (pitch < fp8a::code_pitch(K) || pitch % 16 != 0 || scale_pitch < M)
    cuda_fail(cudaErrorInvalidValue, "fp8_quantize_activations: pitches too small", __FILE__, __LINE__);
  const bool vec = (reinterpret_cast<uintptr_t>(x) & 15u) == 0 && (M == 1 || ldx % 4 == 0);
  const int64_t units = M * fp8a::groups_of(K), per_block = kThreads / 32;
  const int64_t blocks =
      (units + per_block - 1) / per_block < int64_t{1} << 20 ? (units + per_block - 1) / per_block : int64_t{1} << 20;
  launch_pdl(fp8_act_quant_kernel, static_cast<unsigned>(blocks), kThreads, 0, stream, x, ldx, M, K, vec, codes, pitch,
             scales, scale_pitch);
  CUDA_CHECK_LAUNCH();
}

Fp8Activations fp8_activations_scratch(int64_t M, int64_t K, ScratchSlot slot, cudaStream_t stream) {
  Fp8Activations a;
  a.M = M;
  a.K = K;
  a.pitch = fp8a::code_pitch(K);
  a.scale_pitch = fp8a::scale_pitch(M);
  const size_t code_bytes = static_cast<size_t>(M * a.pitch + 1023) / 1024 * 1024;  // the scales 1024-aligned
  const size_t scale_bytes = static_cast<size_t>(fp8a::groups_of(K) * a.scale_pitch) * 4;
  auto* block = static_cast<uint8_t*>(matmul_scratch(code_bytes + scale_bytes, stream, slot));
  a.codes = block;
  a.scales = reinterpret_cast<float*>(block + code_bytes);
  return a;
}

Fp8Activations fp8_quantize_activations(const float* x, int64_t ldx, int64_t M, int64_t K, cudaStream_t stream) {
  const Fp8Activations a = fp8_activations_scratch(M, K, ScratchSlot::Fp8Activation, stream);
  fp8_quantize_activations_into(x, ldx, M, K, const_cast<uint8_t*>(a.codes), a.pitch, const_cast<float*>(a.scales),
                                a.scale_pitch, stream);
  return a;
}

}  // namespace specserve::cuda::kernels
