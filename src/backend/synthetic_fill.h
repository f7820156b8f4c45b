#pragma once
// The pseudo-random fill behind Memory::fill_uniform (synthetic weights for benchmarks on real model
// shapes): element i of a fill keyed by `seed` is lo + (hi - lo) * u(seed, i), u in [0, 1) from the top
// 24 bits of splitmix64(seed + i * golden). Host and device compute the same values from the same
// formula (no contraction on either side), so a synthetic model is the same on every backend.
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

// f32 -> bf16 bits, round to nearest even (the values here are finite).
SS_HOST_DEVICE inline uint16_t to_bf16_bits(float x) {
  uint32_t b;
#if defined(__CUDA_ARCH__)
  b = __float_as_uint(x);
#else
  __builtin_memcpy(&b, &x, 4);
#endif
  b += 0x7FFFu + ((b >> 16) & 1u);
  return static_cast<uint16_t>(b >> 16);
}

}  // namespace specserve::synthetic
