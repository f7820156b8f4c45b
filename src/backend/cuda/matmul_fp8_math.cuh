#pragma once
// The dequantisation of block-scaled fp8 weights on the device, shared by the fp8 gemv kernel
// (matmul_fp8_gemv_kernel.cuh) and the bf16 scratch pass (matmul_fp8_dequant.cu), so both give every weight
// element the same bf16 bits: bf16_rn(f32_rn(e4m3 × scale)), the definition of backend/ops.h and the
// bits io/fp8_blocks.h dequantize_fp8_blocks(..., BF16) stores at load (the CPU's reference).
// The conversion path (dequant2_bf16, dequant16_bf16; the scratch pass and the gemv kernel when forced):
//   - e4m3 -> f16 by cvt.rn.f16x2.e4m3x2 (exact: every e4m3 value is an f16), f16 -> f32 (exact);
//   - one f32 multiply by the block's f32 scale, round to nearest even (__fmul_rn; the library is built
//     with --fmad=false anyway);
//   - f32 -> bf16, round to nearest even (cvt.rn.bf16x2.f32, pack_bf16x2).
// The bit paths of the gemv kernel (dequant_fast, dequant_folded, dequant_bits; matmul_fp8_gemv.cuh says why
// they are exact) avoid the e4m3 conversion instruction, and the fast one every conversion.
// Not covered: the NaN codes 0x7F / 0xFF (which the loader refuses) give a NaN whose bits may differ from
// the CPU's quiet NaN on the conversion path, and ±480 × scale on the bit paths.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "backend/cuda/matmul_fp8_gemv.cuh"
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

// Two bf16 products, each rounded once to nearest even (mul.rn.bf16x2: the exact product, one rounding;
// subnormals kept).
__device__ __forceinline__ uint32_t mul_bf16x2(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

// The bf16x2 register b0 (sel = fp8o::kPairLo) or b1 (fp8o::kPairHi) of a lane from its stored code word w
// (fp8_code_order.h), as pair bits (fp8g::fp8_pair_bits: e4m3 × 2^-120).
__device__ __forceinline__ uint32_t pair_bits(uint32_t w, uint32_t sel) {
  return fp8g::fp8_pair_bits(fp8g::prmt(w, w, sel));
}

// Fast: for a scale that fp8g::fp8_scale_fast takes, sp = fp8g::fp8_scale_pair(s).
__device__ __forceinline__ uint32_t dequant_fast(uint32_t w, uint32_t sel, uint32_t sp) {
  return mul_bf16x2(pair_bits(w, sel), sp);
}

// Folded: for a scale that fp8g::fp8_scale_folds takes, s120 = s × 2^120 (exact): each half widened to f32
// (exact: e4m3 × 2^-120, subnormal for the subnormal codes) times s120, whose real product is e4m3 × s, so
// the one f32 rounding is the definition's; then to bf16.
__device__ __forceinline__ uint32_t dequant_folded(uint32_t w, uint32_t sel, float s120) {
  const uint32_t bits = pair_bits(w, sel);
  return tc::pack_bf16x2(__fmul_rn(__uint_as_float(bits << 16), s120),
                         __fmul_rn(__uint_as_float(bits & 0xffff0000u), s120));
}

// General, for any scale: each half widened to f32, × 2^120 (exact: the e4m3 value), × scale (the
// definition's rounding), to bf16.
__device__ __forceinline__ uint32_t dequant_bits(uint32_t w, uint32_t sel, float scale) {
  const uint32_t bits = pair_bits(w, sel);
  const float l = __fmul_rn(__fmul_rn(__uint_as_float(bits << 16), 0x1p120f), scale);
  const float h = __fmul_rn(__fmul_rn(__uint_as_float(bits & 0xffff0000u), 0x1p120f), scale);
  return tc::pack_bf16x2(l, h);
}

// The conversion path for the same register: its two codes (the word's low half for b0, high half for b1;
// hi = false / true) through the e4m3 conversion instruction (dequant2_bf16).
__device__ __forceinline__ uint32_t dequant_convert(uint32_t w, bool hi, float scale) {
  return dequant2_bf16(static_cast<uint16_t>(hi ? w >> 16 : w & 0xffffu), scale);
}

}  // namespace specserve::cuda::fp8
