#pragma once
// The dequantisation of block-scaled fp8 weights on the device, shared by the fp8 gemv kernel
// (matmul_fp8_gemv.cu) and the bf16 scratch pass (matmul_fp8_dequant.cu), so both give every weight
// element the same bf16 bits: bf16_rn(f32_rn(e4m3 × scale)), the definition of backend/ops.h and the
// bits io/fp8_blocks.h dequantize_fp8_blocks(..., BF16) stores at load (the CPU's reference).
//   - e4m3 -> f16 by cvt.rn.f16x2.e4m3x2 (exact: every e4m3 value is an f16), f16 -> f32 (exact);
//   - one f32 multiply by the block's f32 scale, round to nearest even (__fmul_rn; the library is built
//     with --fmad=false anyway);
//   - f32 -> bf16, round to nearest even (cvt.rn.bf16x2.f32, pack_bf16x2).
// Not covered: the NaN codes 0x7F / 0xFF give a NaN whose bits may differ from the CPU's quiet NaN.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "backend/cuda/matmul_tensor_core_ptx.cuh"

namespace specserve::cuda::fp8 {

inline constexpr int64_t kBlock = 128;  // rows and columns one scale covers (core/tensor.h kFp8BlockSize)

// Two codes (the lower k in the low byte) -> two bf16 in one register (the lower k in the low half).
__device__ __forceinline__ uint32_t dequant2_bf16(uint16_t codes, float scale) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(codes), __NV_E4M3);
  const float lo = __half2float(__ushort_as_half(h.x)), hi = __half2float(__ushort_as_half(h.y));
  return tc::pack_bf16x2(__fmul_rn(lo, scale), __fmul_rn(hi, scale));
}

// 16 codes (one 16-byte piece, the lower k first) -> 16 bf16 (two 16-byte pieces).
__device__ __forceinline__ void dequant16_bf16(const uint4& codes, float scale, uint4& lo, uint4& hi) {
  const uint32_t c[4] = {codes.x, codes.y, codes.z, codes.w};
  uint32_t out[8];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    out[2 * i] = dequant2_bf16(static_cast<uint16_t>(c[i] & 0xffffu), scale);
    out[2 * i + 1] = dequant2_bf16(static_cast<uint16_t>(c[i] >> 16), scale);
  }
  lo = make_uint4(out[0], out[1], out[2], out[3]);
  hi = make_uint4(out[4], out[5], out[6], out[7]);
}

}  // namespace specserve::cuda::fp8
