#pragma once
// The activation side of the W8A8 prefill GEMM (matmul_prefill_fp8_sm90a.cu): x's rows quantised to e4m3 per
// group of 128 columns, as vLLM / SGLang / DeepGEMM quantise activations dynamically ("per token group"). Plain
// C++ that also compiles on the host, so the CPU reference (tests) and the device pre-pass
// (matmul_fp8_act_quant.cu) state the rule once:
//
//   group g of row m: the columns [128 g, min(128 g + 128, K)) of x's row m (columns past K count as zeros);
//   amax   = the largest |x| of the group (a NaN element does not raise it; fmaxf);
//   scale  = max(f32_rn(amax / 448), 2^-126)   (448: e4m3's largest finite value);
//   code_k = e4m3_rn_satfinite(f32_rn(x_k / scale))   (round to nearest even, ±448 beyond, NaN stays NaN).
//
// The floor 2^-126 (the smallest normal f32) is the fixed scale of an all-zero group (its codes are +0/-0,
// so it adds nothing whatever its scale) and keeps the division finite for groups so small that amax / 448
// would be subnormal or zero (their codes then lose precision gracefully instead of becoming inf / NaN).
// Everything is row-local: a row's codes and scales depend on its own x row and K only.
//
// The device converts with cvt.rn.satfinite.e4m3x2.f32 (the same rounding; the GPU tests compare the pass
// against e4m3_rn_satfinite below for every element); the host emulation below is the reference.
#include <math.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define SS_FP8A_DEV __host__ __device__ __forceinline__
#else
#define SS_FP8A_DEV inline
#endif

namespace specserve::cuda::fp8a {

inline constexpr int kGroup = 128;               // columns per activation scale (= the weights' block)
inline constexpr float kE4m3Max = 448.0f;        // e4m3 (fn) largest finite value
inline constexpr float kScaleFloor = 0x1p-126f;  // the smallest scale (2^-126)

SS_FP8A_DEV uint32_t float_bits(float v) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(v);
#else
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return u;
#endif
}

// The scale of a group whose largest magnitude is amax (amax >= 0, or +inf).
SS_FP8A_DEV float group_scale(float amax) {
  const float s = amax / kE4m3Max;  // IEEE division, round to nearest even (the library builds with --fmad=false)
  return s < kScaleFloor ? kScaleFloor : s;
}

// f32 -> e4m3 (fn) code, round to nearest even, saturating to ±448 (inf too); NaN -> 0x7F with the sign.
SS_FP8A_DEV uint8_t e4m3_rn_satfinite(float v) {
  const uint8_t sign = (float_bits(v) >> 31) ? 0x80 : 0x00;
  const float a = fabsf(v);
  if (!(a == a)) return static_cast<uint8_t>(sign | 0x7F);
  if (a >= kE4m3Max) return static_cast<uint8_t>(sign | 0x7E);
  if (a < 0x1p-6f) {                         // subnormal codes: multiples of 2^-9 (8 -> the smallest normal, code 0x08)
    const float q = nearbyintf(a * 512.0f);  // exact scaling; rounds half to even
    return static_cast<uint8_t>(sign | static_cast<uint8_t>(q));
  }
  int e = 0;
  (void)frexpf(a, &e);  // a = f * 2^e, f in [0.5, 1): the exponent of a is e - 1, in [-6, 8]
  const int E = e - 1;
  const int m = static_cast<int>(nearbyintf(ldexpf(a, 3 - E)));  // 8 .. 16 (16: the next binade)
  return static_cast<uint8_t>(sign | static_cast<uint8_t>((E + 6) * 8 + m));
}

// e4m3 (fn) code -> its value (exact in f32); 0x7F / 0xFF -> NaN.
SS_FP8A_DEV float e4m3_value(uint8_t c) {
  const float sign = (c & 0x80) ? -1.0f : 1.0f;
  const int e = (c >> 3) & 0xF, m = c & 7;
  if (e == 0xF && m == 7) return NAN;
  if (e == 0) return sign * ldexpf(static_cast<float>(m), -9);
  return sign * ldexpf(static_cast<float>(8 + m), e - 10);
}

// The codes' row pitch (bytes) of x's quantised copy: K rounded up to 16 (TMA's row stride unit).
SS_FP8A_DEV int64_t code_pitch(int64_t K) { return (K + 15) / 16 * 16; }
// The scales' row pitch (f32) of the transposed scale array [groups, pitch]: M rounded up to 4 (16 bytes).
SS_FP8A_DEV int64_t scale_pitch(int64_t M) { return (M + 3) / 4 * 4; }
SS_FP8A_DEV int64_t groups_of(int64_t K) { return (K + kGroup - 1) / kGroup; }

}  // namespace specserve::cuda::fp8a

#undef SS_FP8A_DEV
