// The AVX-512 matmul kernel (16-lane accumulators). Same structure and the same row-invariance
// argument as the AVX2 kernel in matmul.cpp; its results differ from AVX2 in the last bits, which is
// fine because one process always uses one of them (use_avx512() is fixed at start-up) for prefill,
// decode and extend alike.
#include <immintrin.h>

// GCC 12 reports false "uninitialized" warnings inside its own _mm512 intrinsic headers.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <algorithm>

#include "backend/cpu/matmul_kernels.h"

namespace specserve::cpu {

namespace {

inline __m512 load_w16(const float* w) { return _mm512_loadu_ps(w); }
inline __m512 load_w16(const uint16_t* w) {
  __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
inline __m512 load_w_tail(const float* w, __mmask16 m) { return _mm512_maskz_loadu_ps(m, w); }
inline __m512 load_w_tail(const uint16_t* w, __mmask16 m) {
  __m256i h = _mm256_maskz_loadu_epi16(m, w);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// Fixed tree: 512 -> 256 -> 128 -> scalar.
inline float hsum16(__m512 v) {
  __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  __m128 sh = _mm_movehl_ps(s4, s4);
  s4 = _mm_add_ps(s4, sh);
  sh = _mm_shuffle_ps(s4, s4, 0x55);
  s4 = _mm_add_ss(s4, sh);
  return _mm_cvtss_f32(s4);
}

template <int R, int C, typename W>
inline void tile(const float* x, int64_t ldx, const W* w, int64_t ldw, float* y, int64_t ldy, int64_t K) {
  __m512 acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 16 <= K; k += 16) {
    __m512 wv[C];
    for (int c = 0; c < C; ++c) wv[c] = load_w16(w + c * ldw + k);
    for (int r = 0; r < R; ++r) {
      __m512 xv = _mm512_loadu_ps(x + r * ldx + k);
      for (int c = 0; c < C; ++c) acc[r][c] = _mm512_fmadd_ps(xv, wv[c], acc[r][c]);
    }
  }
  if (k < K) {
    __mmask16 m = static_cast<__mmask16>((1u << (K - k)) - 1u);
    __m512 wv[C];
    for (int c = 0; c < C; ++c) wv[c] = load_w_tail(w + c * ldw + k, m);
    for (int r = 0; r < R; ++r) {
      __m512 xv = _mm512_maskz_loadu_ps(m, x + r * ldx + k);
      for (int c = 0; c < C; ++c) acc[r][c] = _mm512_fmadd_ps(xv, wv[c], acc[r][c]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) y[r * ldy + c] = hsum16(acc[r][c]);
}

template <typename W>
void cols(const MatmulArgs& a, const W* w, int64_t n0, int64_t n1) {
  constexpr int64_t kColBlock = 64;
  for (int64_t nb = n0; nb < n1; nb += kColBlock) {
    int64_t ne = std::min(nb + kColBlock, n1);
    int64_t m = 0;
    for (; m + 4 <= a.M; m += 4) {
      const float* x = a.x + m * a.ldx;
      float* y = a.y + m * a.ldy;
      int64_t n = nb;
      for (; n + 4 <= ne; n += 4) tile<4, 4>(x, a.ldx, w + n * a.ldw, a.ldw, y + n, a.ldy, a.K);
      for (; n < ne; ++n) tile<4, 1>(x, a.ldx, w + n * a.ldw, a.ldw, y + n, a.ldy, a.K);
    }
    for (; m < a.M; ++m) {
      const float* x = a.x + m * a.ldx;
      float* y = a.y + m * a.ldy;
      int64_t n = nb;
      for (; n + 8 <= ne; n += 8) tile<1, 8>(x, a.ldx, w + n * a.ldw, a.ldw, y + n, a.ldy, a.K);
      for (; n < ne; ++n) tile<1, 1>(x, a.ldx, w + n * a.ldw, a.ldw, y + n, a.ldy, a.K);
    }
  }
}

}  // namespace

void matmul_cols_avx512(const MatmulArgs& a, int64_t n0, int64_t n1) {
  if (a.w_bf16)
    cols(a, static_cast<const uint16_t*>(a.w), n0, n1);
  else
    cols(a, static_cast<const float*>(a.w), n0, n1);
}

}  // namespace specserve::cpu
