// The AVX512-BF16 matmul kernel for bf16 weights: activations are rounded to bf16 once per call (as a
// bf16 model's activations are in transformers) and each output element is one 16-lane accumulator
// fed by vdpbf16ps over 32 k at a time in increasing k, a masked tail, then the fixed tree of
// hsum16. Row invariance holds for the same reason as in the other kernels. Used for every bf16
// matmul on machines with AVX512-BF16 (decode, extend and prefill alike), twice the multiply rate of
// widening bf16 to f32 for prefill; decode stays bandwidth-bound either way.
#include <immintrin.h>

#include <algorithm>

#include "backend/cpu/matmul_kernels.h"

#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace specserve::cpu {

namespace {

inline float hsum16(__m512 v) {
  __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  __m128 sh = _mm_movehl_ps(s4, s4);
  s4 = _mm_add_ps(s4, sh);
  sh = _mm_shuffle_ps(s4, s4, 0x55);
  s4 = _mm_add_ss(s4, sh);
  return _mm_cvtss_f32(s4);
}

inline __m512 dot(__m512 acc, __m512i x, __m512i w) {
  return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh&>(x), reinterpret_cast<__m512bh&>(w));
}

template <int R, int C>
inline void tile(const uint16_t* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* y, int64_t ldy, int64_t K) {
  __m512 acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 32 <= K; k += 32) {
    __m512i wv[C];
    for (int c = 0; c < C; ++c) wv[c] = _mm512_loadu_si512(w + c * ldw + k);
    for (int r = 0; r < R; ++r) {
      __m512i xv = _mm512_loadu_si512(x + r * ldx + k);
      for (int c = 0; c < C; ++c) acc[r][c] = dot(acc[r][c], xv, wv[c]);
    }
  }
  if (k < K) {
    const __mmask32 m = static_cast<__mmask32>((1ull << (K - k)) - 1ull);
    __m512i wv[C];
    for (int c = 0; c < C; ++c) wv[c] = _mm512_maskz_loadu_epi16(m, w + c * ldw + k);
    for (int r = 0; r < R; ++r) {
      __m512i xv = _mm512_maskz_loadu_epi16(m, x + r * ldx + k);
      for (int c = 0; c < C; ++c) acc[r][c] = dot(acc[r][c], xv, wv[c]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) y[r * ldy + c] = hsum16(acc[r][c]);
}

}  // namespace

void matmul_cols_avx512bf16(const MatmulArgs& a, int64_t n0, int64_t n1) {
  const auto* w = static_cast<const uint16_t*>(a.w);
  const uint16_t* xb = a.x_bf16;
  constexpr int64_t kColBlock = 64;
  for (int64_t nb = n0; nb < n1; nb += kColBlock) {
    const int64_t ne = std::min(nb + kColBlock, n1);
    int64_t m = 0;
    for (; m + 4 <= a.M; m += 4) {
      const uint16_t* x = xb + m * a.ldx_bf16;
      float* y = a.y + m * a.ldy;
      int64_t n = nb;
      for (; n + 4 <= ne; n += 4) tile<4, 4>(x, a.ldx_bf16, w + n * a.ldw, a.ldw, y + n, a.ldy, a.K);
      for (; n < ne; ++n) tile<4, 1>(x, a.ldx_bf16, w + n * a.ldw, a.ldw, y + n, a.ldy, a.K);
    }
    for (; m < a.M; ++m) {
      const uint16_t* x = xb + m * a.ldx_bf16;
      float* y = a.y + m * a.ldy;
      int64_t n = nb;
      for (; n + 8 <= ne; n += 8) tile<1, 8>(x, a.ldx_bf16, w + n * a.ldw, a.ldw, y + n, a.ldy, a.K);
      for (; n < ne; ++n) tile<1, 1>(x, a.ldx_bf16, w + n * a.ldw, a.ldw, y + n, a.ldy, a.K);
    }
  }
}

}  // namespace specserve::cpu
