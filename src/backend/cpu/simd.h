#pragma once
// AVX2 helpers shared by the CPU kernels. Every reduction here has a fixed lane layout and a fixed
// final horizontal order, so a result depends only on the input values (row invariance).
#include <immintrin.h>

#include <cstdint>

namespace specserve::cpu {

// Lanes 0..n-1 set (n in 0..8), for masked loads of a tail.
inline __m256i tail_mask8(int n) {
  alignas(32) static const int32_t kMask[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kMask + 8 - n));
}

// ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)): a fixed tree.
inline float hsum8(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v);
  __m128 hi = _mm256_extractf128_ps(v, 1);
  __m128 s = _mm_add_ps(lo, hi);
  __m128 sh = _mm_movehl_ps(s, s);
  s = _mm_add_ps(s, sh);
  sh = _mm_shuffle_ps(s, s, 0x55);
  s = _mm_add_ss(s, sh);
  return _mm_cvtss_f32(s);
}

// 8 bf16 values (raw uint16) -> 8 floats (exact).
inline __m256 load_bf16x8(const uint16_t* p) {
  __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

// Dot product of n floats with one 8-lane accumulator (lane l sums elements ≡ l mod 8), tail masked.
inline float dot_f32(const float* a, const float* b, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), _mm256_loadu_ps(b + k), acc);
  if (k < n) {
    __m256i m = tail_mask8(static_cast<int>(n - k));
    acc = _mm256_fmadd_ps(_mm256_maskload_ps(a + k, m), _mm256_maskload_ps(b + k, m), acc);
  }
  return hsum8(acc);
}

// Sum of squares of n floats, same layout as dot_f32.
inline float sum_squares(const float* a, int64_t n) { return dot_f32(a, a, n); }

}  // namespace specserve::cpu
