// The CPU matmul with a block-scaled fp8 weight (`--fp8-weights keep`, docs/MODELS.md §6.1). The weight
// stays e4m3 in memory (half the bytes of bf16); each call dequantises kRowBlock of its rows at a time
// into a per-thread bf16 buffer and runs the process's bf16 kernel (matmul.cpp, matmul_avx512.cpp,
// matmul_bf16dot_avx512.cpp) over them. A weight element becomes exactly the bf16 value the load-time
// dequantisation stores (io/fp8_blocks.h: bf16_rn(f32(e4m3) × scale), the product rounded to f32 first),
// and the bf16 kernel's arithmetic per output element does not depend on which rows or columns share
// its tile, so y has the bits of the bf16 matmul of the dequantised weight, row-invariant as that is.
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "backend/cpu/matmul_kernels.h"
#include "core/dtype.h"
#include "core/tensor.h"

namespace specserve::cpu {

namespace {

// Weight rows dequantised per step: 16 rows of a 12288-long K are 384 KB of bf16, which stay in L2
// while every x row passes over them.
constexpr int64_t kRowBlock = 16;

// 8 f32 -> 8 bf16 bits, round to nearest even; NaN stays a quiet NaN: core/dtype.cpp f32_to_bf16 lane by lane.
inline __m128i bf16_rne8(__m256 v) {
  const __m256i u = _mm256_castps_si256(v);
  const __m256i abs = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
  const __m256i nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7f800000));
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb)), 16);
  const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
  const __m256i r = _mm256_blendv_epi8(rounded, quiet, nan);
  // 8 x u32 (each <= 0xffff) -> 8 x u16 in order: pack within the 128-bit lanes, then take qwords 0 and 2.
  const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
  return _mm256_castsi256_si128(packed);
}

// One weight row's n codes from column c0 (all in one 128-column block, scale s) into out.
inline void dequantize_run(const uint8_t* codes, float s, int64_t n, uint16_t* out, const float* table) {
  const __m256 scale = _mm256_set1_ps(s);
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    const __m128i c8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes + k));
    const __m256 v = _mm256_i32gather_ps(table, _mm256_cvtepu8_epi32(c8), 4);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + k), bf16_rne8(_mm256_mul_ps(v, scale)));
  }
  for (; k < n; ++k) out[k] = f32_to_bf16(table[codes[k]] * s);
}

}  // namespace

void dequantize_fp8_rows_bf16(const MatmulArgs& a, int64_t n0, int64_t n1, uint16_t* out) {
  const float* table = e4m3_f32_table();
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* codes = a.w_fp8 + n * a.ldw;
    const float* scales = a.w_scales + n / kFp8BlockSize * a.scale_ld;
    uint16_t* row = out + (n - n0) * a.K;
    for (int64_t c = 0; c < a.K; c += kFp8BlockSize)
      dequantize_run(codes + c, scales[c / kFp8BlockSize], std::min(kFp8BlockSize, a.K - c), row + c, table);
  }
}

void matmul_cols_fp8(const MatmulArgs& a, int64_t n0, int64_t n1) {
  thread_local std::vector<uint16_t> buffer;
  buffer.resize(static_cast<size_t>(kRowBlock * a.K));
  MatmulArgs b = a;
  b.w_fp8 = nullptr;
  b.w_scales = nullptr;
  b.w = buffer.data();
  b.w_bf16 = true;
  b.ldw = a.K;
  for (int64_t nb = n0; nb < n1; nb += kRowBlock) {
    const int64_t ne = std::min(nb + kRowBlock, n1);
    dequantize_fp8_rows_bf16(a, nb, ne, buffer.data());
    b.y = a.y + nb;  // columns [nb, ne) of y are the buffer's rows [0, ne - nb)
    matmul_cols(b, 0, ne - nb);
  }
}

}  // namespace specserve::cpu
