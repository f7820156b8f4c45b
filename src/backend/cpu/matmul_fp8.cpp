// The CPU matmul with a block-scaled fp8 weight (`--fp8-weights keep`, docs/MODELS.md §6.1). The weight
// stays e4m3 in memory (half the bytes of bf16); each call dequantises kRowBlock of its rows at a time
// into a per-thread bf16 buffer and runs the process's bf16 kernel (matmul.cpp, matmul_avx512.cpp,
// matmul_bf16dot_avx512.cpp) over them. A weight element becomes exactly the bf16 value the load-time
// dequantisation stores (io/fp8_blocks.h: bf16_rn(f32(e4m3) × scale), the product rounded to f32 first),
// and the bf16 kernel's arithmetic per output element does not depend on which rows or columns share
// its tile, so y has the bits of the bf16 matmul of the dequantised weight, row-invariant as that is.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/fp8_bf16_table.h"
#include "backend/cpu/matmul_kernels.h"
#include "core/cpu_features.h"
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

// One weight row's n codes from column c0 (all in one 128-column block, scale s) into out, by the definition:
// a table of the 256 code values, a multiply, a rounding (for blocks whose scale has no table: see below).
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

// A block's table (fp8_bf16_table.h) as two 16-byte tables, each in both 128-bit lanes (vpshufb looks up within
// a lane): the entries' low bytes and their high bytes.
struct TableBytes {
  __m256i lo, hi;
  TableBytes() = default;
  explicit TableBytes(const Fp8Bf16Table& t) {
    alignas(16) uint8_t l[16], h[16];
    for (int i = 0; i < 16; ++i) {
      l[i] = static_cast<uint8_t>(t.entry[i] & 0xff);
      h[i] = static_cast<uint8_t>(t.entry[i] >> 8);
    }
    lo = _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(l)));
    hi = _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(h)));
  }
};

// 16 codes -> their 16 bf16 bits: fp8_bf16_bits lane by lane (entry m, or 8 + m for a zero exponent field; the
// exponent field moved by e; the code's sign on top).
inline __m256i dequantize16(__m128i codes, const TableBytes& t) {
  const __m256i c = _mm256_cvtepu8_epi16(codes);
  const __m256i e_bits = _mm256_and_si256(c, _mm256_set1_epi16(0x78));
  const __m256i sub = _mm256_cmpeq_epi16(e_bits, _mm256_setzero_si256());
  const __m256i idx =
      _mm256_or_si256(_mm256_and_si256(c, _mm256_set1_epi16(7)), _mm256_and_si256(sub, _mm256_set1_epi16(8)));
  // The index in each lane's low byte; 0x80 in its high byte makes vpshufb write zero there.
  const __m256i sel = _mm256_or_si256(idx, _mm256_set1_epi16(static_cast<int16_t>(0x8000)));
  const __m256i entry =
      _mm256_or_si256(_mm256_shuffle_epi8(t.lo, sel), _mm256_slli_epi16(_mm256_shuffle_epi8(t.hi, sel), 8));
  const __m256i bits = _mm256_add_epi16(entry, _mm256_slli_epi16(e_bits, 4));
  return _mm256_or_si256(bits, _mm256_slli_epi16(_mm256_and_si256(c, _mm256_set1_epi16(0x80)), 8));
}

// A block's table, with its AVX2 byte form, or none (ok false: its scale takes dequantize_run).
struct BlockTable {
  Fp8Bf16Table t;
  TableBytes bytes;
  bool ok = false;
};

// The same n codes through the block's table (32 a step with AVX-512).
inline void dequantize_run_table(const uint8_t* codes, const BlockTable& b, int64_t n, uint16_t* out) {
  const Fp8Bf16Table& t = b.t;
  if (use_avx512()) return dequantize_fp8_table_avx512(codes, t.entry, n, out);
  const TableBytes& tb = b.bytes;
  int64_t k = 0;
  for (; k + 16 <= n; k += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + k),
                        dequantize16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + k)), tb));
  for (; k < n; ++k) out[k] = fp8_bf16_bits(codes[k], t);
}

}  // namespace

void dequantize_fp8_rows_bf16(const MatmulArgs& a, int64_t n0, int64_t n1, uint16_t* out) {
  const float* table = e4m3_f32_table();
  const auto blocks = static_cast<size_t>((a.K + kFp8BlockSize - 1) / kFp8BlockSize);
  // The tables of a 128-row block's scales, kept from call to call (a matmul's 16-row steps meet the same
  // block eight times) and rebuilt when the scales differ.
  thread_local std::vector<float> cached_scales;
  thread_local std::vector<BlockTable> tables;
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* codes = a.w_fp8 + n * a.ldw;
    const float* scales = a.w_scales + n / kFp8BlockSize * a.scale_ld;
    if (n == n0 || n % kFp8BlockSize == 0) {
      if (cached_scales.size() != blocks || std::memcmp(cached_scales.data(), scales, blocks * sizeof(float)) != 0) {
        cached_scales.assign(scales, scales + blocks);
        tables.resize(blocks);
        for (size_t b = 0; b < blocks; ++b) {
          BlockTable& bt = tables[b];
          bt.ok = make_fp8_bf16_table(scales[b], bt.t);
          if (bt.ok && !use_avx512()) bt.bytes = TableBytes(bt.t);  // the AVX2 form's lookup
        }
      }
    }
    uint16_t* row = out + (n - n0) * a.K;
    for (int64_t c = 0, b = 0; c < a.K; c += kFp8BlockSize, ++b) {
      const int64_t len = std::min(kFp8BlockSize, a.K - c);
      if (tables[static_cast<size_t>(b)].ok)
        dequantize_run_table(codes + c, tables[static_cast<size_t>(b)], len, row + c);
      else
        dequantize_run(codes + c, scales[b], len, row + c, table);
    }
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
