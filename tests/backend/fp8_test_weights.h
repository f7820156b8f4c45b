#pragma once
// Block-scaled fp8 test weights for the matmul tests (CPU tests/backend/test_matmul_fp8.cpp, GPU
// tests/backend_cuda/test_cuda_matmul_fp8.cpp): random e4m3 codes (every finite code, no NaN) with random
// f32 scales per 128 x 128 block, and their dequantisations written out here element by element from the
// definition (ops.h, Ops::matmul): f32 = e4m3 × scale rounded once to f32, bf16 = that rounded to nearest
// even. By default the scales are f32 values with a full 24-bit significand, so the f32 product itself
// rounds and the bf16 value is a double rounding, as at load. Fp8Scales picks other scales: bf16 values (as
// Qwen's FP8 checkpoints store them; the CUDA fp8 gemv's fast path), a mix of both per block (with some
// bf16 values outside that path's range), or tiny ones.
#include <cmath>
#include <cstdint>
#include <random>

#include "core/dtype.h"
#include "core/tensor.h"

namespace specserve::testing {

struct Fp8TestWeight {
  Tensor codes;   // F8_E4M3 [N, K]
  Tensor scales;  // F32 [ceil(N / 128), ceil(K / 128)]
  Tensor f32;     // F32 [N, K]: e4m3 × scale
  Tensor bf16;    // BF16 [N, K]: bf16_rn of f32
  // The codes as the matmul takes them (host memory).
  TensorView view() const {
    TensorView v = codes.view();
    v.scales = scales.as<const float>();
    return v;
  }
};

enum class Fp8Scales {
  F32,    // full 24-bit significands in [2^-12, 2^-3)
  Tiny,   // near 2^-130, so that many products are f32 subnormals (the rounding's edge cases)
  Bf16,   // bf16 values in [2^-12, 2^-3)
  Mixed,  // per block: bf16 values, f32 values, bf16 values near 2^-107 and from 2 to 2^10 (some beyond the fast path)
};

inline Fp8TestWeight make_fp8_weight(int64_t N, int64_t K, uint32_t seed, Fp8Scales kind = Fp8Scales::F32) {
  std::mt19937 rng(seed);
  Fp8TestWeight w;
  const Shape grid({(N + 127) / 128, (K + 127) / 128});
  w.scales = Tensor::empty(DType::F32, grid);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  const bool tiny = kind == Fp8Scales::Tiny;
  std::uniform_int_distribution<int> exponent(tiny ? -134 : -12, tiny ? -126 : -4);
  for (int64_t i = 0; i < grid.numel(); ++i) {
    float s = std::ldexp(mantissa(rng), exponent(rng));
    const int64_t pick = kind == Fp8Scales::Bf16 ? 0 : kind == Fp8Scales::Mixed ? i % 5 : 4;
    if (pick == 0 || pick == 1) s = bf16_to_f32(f32_to_bf16(s));
    if (pick == 2) s = bf16_to_f32(f32_to_bf16(std::ldexp(s, -100)));
    if (pick == 3) s = bf16_to_f32(f32_to_bf16(std::ldexp(s, 13)));
    w.scales.as<float>()[i] = s;
  }
  w.codes = Tensor::empty(DType::F8_E4M3, {N, K});
  w.f32 = Tensor::empty(DType::F32, {N, K});
  w.bf16 = Tensor::empty(DType::BF16, {N, K});
  std::uniform_int_distribution<int> code(0, 255);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) {
      int c = code(rng);
      if ((c & 0x7f) == 0x7f) c ^= 1;  // 0x7F / 0xFF are NaN
      const int64_t i = n * K + k;
      w.codes.as<uint8_t>()[i] = static_cast<uint8_t>(c);
      const float s = w.scales.as<float>()[(n / 128) * grid[1] + k / 128];
      w.f32.as<float>()[i] = e4m3_to_f32(static_cast<uint8_t>(c)) * s;
      w.bf16.as<uint16_t>()[i] = f32_to_bf16(w.f32.as<float>()[i]);
    }
  return w;
}
inline Fp8TestWeight make_fp8_weight(int64_t N, int64_t K, uint32_t seed, bool tiny_scales) {
  return make_fp8_weight(N, K, seed, tiny_scales ? Fp8Scales::Tiny : Fp8Scales::F32);
}

}  // namespace specserve::testing
