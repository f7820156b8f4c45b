#pragma once
// The pseudo-random fill behind Memory::fill_uniform (synthetic weights for benchmarks on real model
// shapes): element i of a fill keyed by `seed` is lo + (hi - lo) * u(seed, i), u in [0, 1) from the top
// 24 bits of splitmix64(seed + i * golden), stored as f32, bf16 or an e4m3 code (fp8 synthetic weights). Host and
// device compute the same values from the same formula (no contraction on either side), so a synthetic model is the
// same on every backend.
#include <cstdint>

#if defined(__CUDACC__)
#define SS_HOST_DEVICE __host__ __device__
#else
#define SS_HOST_DEVICE
#endif

namespace specserve::synthetic {

SS_HOST_DEVICE inline float uniform_at(uint64_t seed, uint64_t i, float lo, float hi) {
  uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  const float u = static_cast<float>(z >> 40) * (1.0f / 16777216.0f);
  return lo + (hi - lo) * u;
}

// A float's bits and back, on the host and the device.
SS_HOST_DEVICE inline uint32_t f32_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  uint32_t b;
  __builtin_memcpy(&b, &x, 4);
  return b;
#endif
}
SS_HOST_DEVICE inline float f32_from_bits(uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(b);
#else
  float x;
  __builtin_memcpy(&x, &b, 4);
  return x;
#endif
}

// f32 -> OCP e4m3 ("fn") code, round to nearest even, saturating to ±448 (0x7E / 0xFE): the codes of the
// synthetic fp8 weights (the values here are finite). Equal to core/dtype.h's f32_to_e4m3, which is host-only.
SS_HOST_DEVICE inline uint8_t to_e4m3_bits(float x) {
  uint32_t b = f32_bits(x);
  const auto sign = static_cast<uint8_t>((b >> 24) & 0x80u);
  b &= 0x7FFFFFFFu;
  const float a = f32_from_bits(b);
  if (a >= 448.0f) return sign | 0x7Eu;
  if (a < 0.015625f) {           // below 2^-6: subnormal, steps of 2^-9 (8 steps is 2^-6, code 0x08)
    const float m = a * 512.0f;  // exact
    auto q = static_cast<uint32_t>(m);
    const float frac = m - static_cast<float>(q);
    if (frac > 0.5f || (frac == 0.5f && (q & 1u))) ++q;
    return static_cast<uint8_t>(sign | q);
  }
  b += 0x7FFFFu + ((b >> 20) & 1u);                                    // the 23-bit mantissa to 3 bits, nearest even
  const uint32_t code = (((b >> 23) - 120u) << 3) | ((b >> 20) & 7u);  // exponent bias 127 -> 7
  return static_cast<uint8_t>(sign | (code > 0x7Eu ? 0x7Eu : code));
}

// f32 -> bf16 bits, round to nearest even (the values here are finite).
SS_HOST_DEVICE inline uint16_t to_bf16_bits(float x) {
  uint32_t b = f32_bits(x);
  b += 0x7FFFu + ((b >> 16) & 1u);
  return static_cast<uint16_t>(b >> 16);
}

}  // namespace specserve::synthetic
