// The AVX-512 form of the fp8 weight's per-block table dequantisation (matmul_fp8.cpp, fp8_bf16_table.h): 32
// codes a step, the entry looked up by one vpermw. The same bits as the AVX2 form and the scalar definition.
#include <immintrin.h>

// GCC 12 reports false "uninitialized" warnings inside its own _mm512 intrinsic headers.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "backend/cpu/matmul_kernels.h"

namespace specserve::cpu {

namespace {

// 32 codes (zero-extended to 16-bit lanes) -> their bf16 bits: the entry m, or 8 + m for a zero exponent field;
// the exponent field moved by e; the code's sign on top.
inline __m512i dequantize32(__m512i c, __m512i table) {
  const __m512i e_bits = _mm512_and_si512(c, _mm512_set1_epi16(0x78));
  const __mmask32 sub = _mm512_testn_epi16_mask(c, _mm512_set1_epi16(0x78));
  __m512i idx = _mm512_and_si512(c, _mm512_set1_epi16(7));
  idx = _mm512_mask_add_epi16(idx, sub, idx, _mm512_set1_epi16(8));
  const __m512i bits = _mm512_add_epi16(_mm512_permutexvar_epi16(idx, table), _mm512_slli_epi16(e_bits, 4));
  return _mm512_or_si512(bits, _mm512_slli_epi16(_mm512_and_si512(c, _mm512_set1_epi16(0x80)), 8));
}

}  // namespace

void dequantize_fp8_table_avx512(const uint8_t* codes, const uint16_t* entries, int64_t n, uint16_t* out) {
  const __m512i table = _mm512_zextsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(entries)));
  int64_t k = 0;
  for (; k + 32 <= n; k += 32) {
    const __m512i c = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + k)));
    _mm512_storeu_si512(out + k, dequantize32(c, table));
  }
  if (k < n) {
    const __mmask32 m = static_cast<__mmask32>((uint64_t{1} << (n - k)) - 1);
    const __m512i c = _mm512_cvtepu8_epi16(_mm256_maskz_loadu_epi8(m, codes + k));
    _mm512_mask_storeu_epi16(out + k, m, dequantize32(c, table));
  }
}

}  // namespace specserve::cpu
