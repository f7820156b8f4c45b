// The fp8 gemv kernel's host-side pieces (backend/cuda/matmul_fp8_gemv.cuh; no GPU needed): the
// dequantisation identities its bit paths rely on, checked for every e4m3 code against the definition
// bf16_rn(f32_rn(e4m3 × scale)) with the PTX instructions emulated (prmt with its sign-replicating selector
// nibbles; mul.rn.bf16x2 as the exact product rounded once), the lanes' shared-memory reads giving exactly
// the mma B fragments of the codes the whole-tile loads put there in fragment order (fp8_code_order.h; without
// bank conflicts), the A fragments (f32 x rounded once per tile into the warp's bf16 tile in that order, then one
// 8-byte load a chunk; x's bf16 copy by ldmatrix.x4), the tiles the main
// loop runs straight and its chain switch (every chunk of a warp's run once, in order, in its slice's
// chain), the scale slots covering every chunk of every warp, and the layout fitting the device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/fp8_code_order.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/matmul_fp8_gemv.cuh"
#include "core/dtype.h"

namespace specserve::cuda_test {
namespace {

namespace fp8g = cuda::fp8g;
namespace fp8o = cuda::fp8o;
namespace tc = cuda::tc;

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
bool is_nan_code(int c) { return (c & 0x7f) == 0x7f; }

// The definition (backend/ops.h): the e4m3 value times the scale rounded to f32, then to bf16.
uint16_t reference(int code, float scale) { return f32_to_bf16(e4m3_to_f32(static_cast<uint8_t>(code)) * scale); }

// mul.rn.bf16x2 on one half: the exact product (at most 8 + 8 significant bits: exact in double), rounded
// once to bf16 (through f32, exact for products of at most 24 significant bits in f32's range).
uint16_t mul_bf16(uint16_t a, uint16_t b) {
  const double p = double(bf16_to_f32(a)) * double(bf16_to_f32(b));
  return f32_to_bf16(static_cast<float>(p));
}

// The pair bits (bf16x2) of codes c0 (low half) and c1 (high half) as a lane builds them from its stored word
// (fp8_code_order.h): the codes at bytes 0, 1 (b0, fp8o::kPairLo) or 2, 3 (b1, fp8o::kPairHi), the other two
// bytes `fill`.
uint32_t pair_bits_of(int c0, int c1, bool hi, uint8_t fill = 0x5a) {
  uint8_t bytes[4];
  std::memset(bytes, fill, 4);
  bytes[hi ? 2 : 0] = static_cast<uint8_t>(c0);
  bytes[hi ? 3 : 1] = static_cast<uint8_t>(c1);
  uint32_t w;
  std::memcpy(&w, bytes, 4);
  return fp8g::fp8_pair_bits(fp8g::prmt(w, w, hi ? fp8o::kPairHi : fp8o::kPairLo));
}

// The kernel's fast path for code c (dequant_fast), its folded path (dequant_folded: f32 product of the
// widened pair bits and scale × 2^120, then bf16) and its general bit path (dequant_bits).
uint16_t fast(int code, float scale) {
  const uint32_t p = pair_bits_of(code, 0, false);
  const uint32_t sp = fp8g::fp8_scale_pair(bits_of(scale));
  return mul_bf16(static_cast<uint16_t>(p & 0xffffu), static_cast<uint16_t>(sp & 0xffffu));
}
uint16_t folded(int code, float scale) {
  const uint32_t p = pair_bits_of(0, code, true);  // the high half and b1 this time
  const float s120 = scale * std::ldexp(1.0f, 120);
  return f32_to_bf16(float_of(p & 0xffff0000u) * s120);
}
uint16_t bit_path(int code, float scale) {
  const uint32_t p = pair_bits_of(code, 0, true);
  const float v = float_of(p << 16) * std::ldexp(1.0f, 120);
  return f32_to_bf16(v * scale);
}

TEST(Fp8GemvHost, PermuteSelectorsHaveThePtxSemantics) {
  // prmt.b32 default mode: nibble i picks byte (n & 7) of {b:a}, or with bit 3 set that byte's sign.
  EXPECT_EQ(fp8g::prmt(0x33221100u, 0x77665544u, 0x7654u), 0x77665544u);
  EXPECT_EQ(fp8g::prmt(0x80010280u, 0x00000000u, 0x9180u), 0x0002ff80u);
  EXPECT_EQ(fp8g::prmt(0x00000000u, 0x7f80ff01u, 0xfedcu), 0x00ffff00u);
  // The fixed selectors: [c0, sign(c0), c1, sign(c1)] from bytes 0, 1 (kPairLo) or 2, 3 (kPairHi).
  EXPECT_EQ(fp8g::prmt(0x7f80017eu, 0x7f80017eu, fp8o::kPairLo), 0x0001007eu);
  EXPECT_EQ(fp8g::prmt(0x7f80017eu, 0x7f80017eu, fp8o::kPairHi), 0x007fff80u);
}

// Fragment order (fp8_code_order.h): a whole group's word t holds columns 2t, 2t + 1, 2t + 8, 2t + 9; slot_of
// and column_of are inverse permutations; a group cut by K, and only it, keeps its order; a pair stays adjacent.
TEST(Fp8GemvHost, FragmentOrderPutsEachLanesCodesInOneWord) {
  for (int t = 0; t < 4; ++t) {
    EXPECT_EQ(fp8o::slot_of(2 * t), 4 * t);
    EXPECT_EQ(fp8o::slot_of(2 * t + 1), 4 * t + 1);
    EXPECT_EQ(fp8o::slot_of(2 * t + 8), 4 * t + 2);
    EXPECT_EQ(fp8o::slot_of(2 * t + 9), 4 * t + 3);
  }
  std::vector<int> seen(16, 0);
  for (int j = 0; j < 16; ++j) {
    ++seen[size_t(fp8o::slot_of(j))];
    EXPECT_EQ(fp8o::column_of(fp8o::slot_of(j)), j);
    if (j % 2 == 0) EXPECT_EQ(fp8o::slot_of(j + 1), fp8o::slot_of(j) + 1);
  }
  EXPECT_EQ(seen, std::vector<int>(16, 1));
  for (int64_t K : {16, 40, 4096, 4100, 7}) {
    std::vector<int> hits(size_t(K), 0);
    for (int64_t k = 0; k < K; ++k) {
      const int64_t s = fp8o::stored_index(k, K);
      ASSERT_GE(s, 0);
      ASSERT_LT(s, K);
      ++hits[size_t(s)];
      const bool whole = k / 16 * 16 + 16 <= K;
      ASSERT_EQ(fp8o::whole_group(k, K), whole) << k << " of " << K;
      if (!whole) ASSERT_EQ(s, k) << k << " of " << K;
      ASSERT_EQ(s / 16, k / 16);
    }
    EXPECT_EQ(hits, std::vector<int>(size_t(K), 1)) << K;
  }
}

TEST(Fp8GemvHost, PairBitsAreTheCodesTimesTwoToTheMinus120) {
  for (int t = 0; t < 4; ++t)
    for (int c = 0; c < 256; ++c) {
      if (is_nan_code(c)) continue;
      const double want = std::ldexp(double(e4m3_to_f32(static_cast<uint8_t>(c))), -120);
      for (uint8_t fill : {0x00, 0xff, 0x80, 0x7f}) {
        const uint32_t both = pair_bits_of(c, c ^ 0x80, t % 2 == 1, fill);
        ASSERT_EQ(double(bf16_to_f32(static_cast<uint16_t>(both & 0xffffu))), want) << "code " << c << " t " << t;
        ASSERT_EQ(double(bf16_to_f32(static_cast<uint16_t>(both >> 16))), -want) << "code " << (c ^ 0x80);
        ASSERT_EQ(std::signbit(bf16_to_f32(static_cast<uint16_t>(both & 0xffffu))), c >= 128) << c;
      }
    }
}

// Every finite code times bf16 scales of every exponent the fast path takes (random significands, and the
// range's ends) has the definition's bits; the predicate refuses f32 significands, NaN, infinities and the
// exponents beyond, where the fast path's single rounding can differ from the definition's double one
// (found here for f32 significands: so this check can fail).
TEST(Fp8GemvHost, FastPathHasTheDefinitionsBitsWhereItIsTaken) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  int64_t checked = 0;
  for (int e = -100; e <= 7; ++e)
    for (int i = 0; i < 6; ++i) {
      const float m = i == 0 ? 1.0f : i == 1 ? bf16_to_f32(0x3fff) : mantissa(rng);
      for (float sign : {1.0f, -1.0f}) {
        const float s = bf16_to_f32(f32_to_bf16(sign * std::ldexp(m, e)));
        ASSERT_TRUE(fp8g::fp8_scale_fast(bits_of(s))) << s;
        for (int c = 0; c < 256; ++c) {
          if (is_nan_code(c)) continue;
          ASSERT_EQ(fast(c, s), reference(c, s)) << "code " << c << " scale " << s;
          ++checked;
        }
      }
    }
  EXPECT_GT(checked, 300000);
  for (float s : {std::ldexp(1.0f, 8), std::ldexp(1.0f, -101), 0.0f, 1.0f + std::ldexp(1.0f, -20), INFINITY, NAN,
                  std::ldexp(1.5f, -130)})
    EXPECT_FALSE(fp8g::fp8_scale_fast(bits_of(s))) << s;
  int differ = 0;
  for (int i = 0; i < 200; ++i) {
    const float s = std::ldexp(mantissa(rng), -8);
    for (int c = 0; c < 256; ++c)
      if (!is_nan_code(c) && fast(c, bf16_to_f32(f32_to_bf16(s))) != reference(c, s)) ++differ;
  }
  EXPECT_GT(differ, 0) << "f32 scales rounded to bf16 must not reproduce the definition";
}

// The folded path (one f32 multiply by scale × 2^120) is exact for every finite code and every scale the
// predicate takes: f32 significands, every exponent from the subnormal 2^-149 up to just below 2^8 (products
// subnormal in f32 included), both signs, zero; the predicate refuses 2^8 and beyond, infinities and NaN.
TEST(Fp8GemvHost, FoldedPathHasTheDefinitionsBitsWhereItIsTaken) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  int64_t checked = 0;
  for (int e = -149; e <= 7; ++e)
    for (int i = 0; i < 4; ++i) {
      const float m = i == 0 ? 1.0f : i == 1 ? std::nextafter(2.0f, 0.0f) : mantissa(rng);
      for (float sign : {1.0f, -1.0f}) {
        const float s = sign * std::ldexp(m, e);
        ASSERT_TRUE(fp8g::fp8_scale_folds(bits_of(s))) << s;
        for (int c = 0; c < 256; ++c) {
          if (is_nan_code(c)) continue;
          ASSERT_EQ(folded(c, s), reference(c, s)) << "code " << c << " scale " << s;
          ++checked;
        }
      }
    }
  EXPECT_GT(checked, 300000);
  for (float s : {0.0f, -0.0f, std::ldexp(1.0f, -149), std::nextafter(256.0f, 0.0f)})
    EXPECT_TRUE(fp8g::fp8_scale_folds(bits_of(s))) << s;
  for (float s : {256.0f, -256.0f, std::ldexp(1.0f, 100), INFINITY, -INFINITY, NAN})
    EXPECT_FALSE(fp8g::fp8_scale_folds(bits_of(s))) << s;
}

// The bit path is exact for every finite code and every finite scale, subnormal products included.
TEST(Fp8GemvHost, BitPathHasTheDefinitionsBits) {
  std::mt19937 rng(6);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  for (int e = -149; e <= 100; e += 3)
    for (int i = 0; i < 4; ++i) {
      const float s = (i % 2 ? -1.0f : 1.0f) * std::ldexp(i < 2 ? mantissa(rng) : 1.0f, e);
      for (int c = 0; c < 256; ++c) {
        if (is_nan_code(c)) continue;
        ASSERT_EQ(bit_path(c, s), reference(c, s)) << "code " << c << " scale " << s;
      }
    }
}

// ldmatrix.x4 / .x2 (b16): lanes 8i..8i+7 give the 8 row addresses of matrix i; lane l receives, in register i,
// the 4 bytes at byte 4 (l % 4) of matrix i's row l / 4.
template <int N>
void ldmatrix(const std::vector<uint8_t>& smem, const int (&addr)[32], uint32_t (&out)[32][4]) {
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < N; ++i) std::memcpy(&out[lane][i], &smem[size_t(addr[8 * i + lane / 4] + 4 * (lane % 4))], 4);
}

// Whether an ldmatrix's row addresses (8 a matrix, lanes 8i .. 8i + 7) put each matrix's 8 rows in 8 distinct
// 16-byte bank groups: one shared-memory wavefront a matrix.
bool ldmatrix_conflict_free(const int (&addr)[32]) {
  for (int i = 0; i < 4; ++i) {
    std::vector<int> groups;
    for (int r = 0; r < 8; ++r) groups.push_back((addr[8 * i + r] / 16) % 8);
    std::sort(groups.begin(), groups.end());
    if (std::adjacent_find(groups.begin(), groups.end()) != groups.end()) return false;
  }
  return true;
}

// Whole-tile loads of a random 16-row code block, arranged in fragment order as on the device, into a stage,
// then every lane's reads: the code ldmatrix.x4 of two chunks (and the .x2 of one, the general tiles'), permuted,
// holds the B fragment's codes of k 2t, 2t + 1 (b0) and 2t + 8, 2t + 9 (b1) of weight row g (+ 8 for the second
// n8 tile) in each chunk c, as pair bits; the conversion path's code pairs are the same codes. Each 8 × 16-byte
// matrix's rows lie in distinct bank groups (one wavefront).
template <int St, fp8g::XMode X>
void check_fragments(int x_rows) {
  using C = fp8g::Fp8Gemv<St, X>;
  const fp8g::Fp8Layout<C> lay{x_rows, fp8g::scale_slots(8, 32, C::kWarps)};
  const int64_t K = 4096, ldq = K + 16;
  std::mt19937 rng(uint32_t(St * 7 + int(X)));
  std::vector<uint8_t> w(size_t(16 * ldq)), stored(w.size());  // natural; as fp8_arrange_codes leaves it
  for (auto& b : w) b = static_cast<uint8_t>(rng());
  for (int64_t n = 0; n < 16; ++n)
    for (int64_t k = 0; k < ldq; ++k)
      stored[size_t(n * ldq + (k < K ? fp8o::stored_index(k, K) : k))] = w[size_t(n * ldq + k)];
  std::vector<uint8_t> smem(size_t(lay.smem_bytes(8)), 0);
  const int64_t begin = 40;  // chunks: a run starting inside a scale block
  for (int warp = 0; warp < C::kWarps; ++warp)
    for (int tile = 0; tile < 3; ++tile) {
      const int stage = tile % St, sb = stage * lay.stage_bytes();
      std::vector<fp8g::Fp8Lane<C>> lanes;
      for (int lane = 0; lane < 32; ++lane)
        lanes.push_back(fp8g::fp8_lane(lay, warp, lane, /*n0w=*/0, ldq, begin, /*m0=*/0, /*ldx=*/4096 + 128, 16));
      for (int lane = 0; lane < 32; ++lane)
        for (int j = 0; j < 4; ++j)  // the whole tiles' pieces, where the general tiles put them (q_off)
          ASSERT_EQ(lanes[lane].q_dst_of(j), lay.q_off(warp, 0, lane / 8 + 4 * j, (lane % 8) * 16));
      for (int lane = 0; lane < 32; ++lane)
        for (int j = 0; j < 4; ++j)
          std::memcpy(&smem[size_t(lanes[lane].q_dst_of(j) + sb)],
                      &stored[size_t(lanes[lane].q_src + tile * 128 + j * 4 * ldq)], 16);
      for (int c = 0; c < C::kChunks; ++c) {
        int addr[32];
        for (int lane = 0; lane < 32; ++lane) {
          // the regular tile's x4 at its even chunk (registers 2, 3 for the odd one); the general tile's x2
          addr[lane] = lanes[lane].q_pair(c / 2) + sb;
          ASSERT_EQ(addr[lane] % 16, 0);
        }
        uint32_t q4[32][4], q2[32][4];
        ASSERT_TRUE(ldmatrix_conflict_free(addr)) << "x4 at chunk " << c << " warp " << warp;
        ldmatrix<4>(smem, addr, q4);
        for (int lane = 0; lane < 32; ++lane) addr[lane] = lanes[lane].q_chunk(c) + sb;
        ASSERT_TRUE(ldmatrix_conflict_free(addr)) << "x2 at chunk " << c << " warp " << warp;
        ldmatrix<2>(smem, addr, q2);
        for (int lane = 0; lane < 32; ++lane)
          for (int nt = 0; nt < 2; ++nt) {
            const uint32_t v = q4[lane][2 * (c % 2) + nt];
            ASSERT_EQ(v, q2[lane][nt]);
            const int g = lane >> 2, t = lane & 3;
            const uint8_t* row = &w[size_t((g + 8 * nt) * ldq + begin * 16 + tile * 128 + c * 16)];
            const uint32_t b0 = fp8g::fp8_pair_bits(fp8g::prmt(v, v, fp8o::kPairLo));
            const uint32_t b1 = fp8g::fp8_pair_bits(fp8g::prmt(v, v, fp8o::kPairHi));
            const std::string where = "lane " + std::to_string(lane) + " chunk " + std::to_string(c) + " tile " +
                                      std::to_string(nt) + " warp " + std::to_string(warp);
            ASSERT_EQ(b0, pair_bits_of(row[2 * t], row[2 * t + 1], false, 0)) << where;
            ASSERT_EQ(b1, pair_bits_of(row[2 * t + 8], row[2 * t + 9], true, 0)) << where;
            ASSERT_EQ(v & 0xffffu, uint32_t(row[2 * t]) | uint32_t(row[2 * t + 1]) << 8) << where;
            ASSERT_EQ(v >> 16, uint32_t(row[2 * t + 8]) | uint32_t(row[2 * t + 9]) << 8) << where;
          }
      }
    }
}

TEST(Fp8GemvHost, LanesReadTheMmaBFragments) {
  check_fragments<8, fp8g::XMode::F32>(1);
  check_fragments<3, fp8g::XMode::F32>(4);
  check_fragments<6, fp8g::XMode::Xb8>(0);
  check_fragments<4, fp8g::XMode::Xb16>(0);
}

uint32_t bf16_pair(float lo, float hi) { return uint32_t(f32_to_bf16(lo)) | uint32_t(f32_to_bf16(hi)) << 16; }

// The A fragments. f32 x (1-4 rows): the stage's x rows, rounded by tile_x's lanes into the warp's bf16 tile,
// then ldmatrix.x4 through the lanes' addresses, give every lane the mma A fragment of the rounded x (a0 a1
// a2 a3: rows g, g + 8 at k 2t and 2t + 8 of the chunk) for rows below M, and for the rows past M the
// fragment of a row below M (their outputs are never stored). x's bf16 copy: the same through the stage.
template <int St, fp8g::XMode X>
void check_a_fragments(int rows) {
  using C = fp8g::Fp8Gemv<St, X>;
  const fp8g::Fp8Layout<C> lay{rows, 10};
  std::mt19937 rng(uint32_t(rows * 11 + int(X)));
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int held = X == fp8g::XMode::F32 ? rows : C::kXbRows;
  std::vector<float> x(size_t(held * 128));
  for (auto& v : x) v = nd(rng);
  std::vector<uint8_t> smem(size_t(lay.smem_bytes(8)), 0xee);  // (poison: the reads must not see it)
  for (int warp : {0, 3}) {
    const int stage = St - 1, sb = stage * lay.stage_bytes();
    std::vector<fp8g::Fp8Lane<C>> lanes;
    for (int lane = 0; lane < 32; ++lane) lanes.push_back(fp8g::fp8_lane(lay, warp, lane, 0, 4096, 0, 0, 4224, rows));
    if constexpr (X == fp8g::XMode::F32) {
      for (int lane = 0; lane < 32; ++lane)  // the whole-tile x pieces (4 floats a lane and row)
        for (int r = 0; r < rows; ++r)
          std::memcpy(&smem[size_t(lanes[lane].x_dst + sb + r * C::kSA * 4)], &x[size_t(r * 128 + 4 * lane)], 16);
      for (int lane = 0; lane < 32; ++lane)  // tile_x
        for (int r = 0; r < rows; ++r) {
          float v[4];
          std::memcpy(v, &smem[size_t(lanes[lane].x_dst + sb + r * C::kSA * 4)], 16);
          const uint32_t h[2] = {bf16_pair(v[0], v[1]), bf16_pair(v[2], v[3])};
          for (int i = 0; i < 2; ++i)
            std::memcpy(&smem[size_t(lanes[lane].xh_dst[i] + r * lay.xh_row_bytes())], &h[i], 4);
        }
    } else {  // the whole-tile pieces (issue_x_whole: 8 elements a lane and row pair), as the general tiles put them
      std::vector<uint16_t> xb(x.size());
      for (size_t i = 0; i < x.size(); ++i) xb[i] = f32_to_bf16(x[i]);
      for (int lane = 0; lane < 32; ++lane)
        for (int i = 0; i < C::kXbRows / 2; ++i) {
          const int r = lane / 16 + 2 * i, k = (lane % 16) * 8;
          ASSERT_EQ(lanes[lane].x_dst_of(i) + sb, lay.x_off(warp, stage, r, k)) << "lane " << lane << " pair " << i;
          std::memcpy(&smem[size_t(lanes[lane].x_dst_of(i) + sb)], &xb[size_t(r * 128 + k)], 16);
        }
      for (int r = 0; r < held; ++r)  // every element where x_off says, inside the stage's x bytes
        for (int k = 0; k < 128; ++k) {
          const int off = lay.x_off(warp, stage, r, k);
          ASSERT_GE(off, lay.stage_off(warp, stage) + lay.q_bytes());
          ASSERT_LT(off, lay.stage_off(warp, stage) + lay.stage_bytes());
          ASSERT_EQ(std::memcmp(&smem[size_t(off)], &xb[size_t(r * 128 + k)], 2), 0) << "row " << r << " k " << k;
        }
    }
    for (int kk = 0; kk < C::kChunks; ++kk) {
      int addr[32];
      uint32_t a[32][4];
      if constexpr (X == fp8g::XMode::F32) {  // one 8-byte load: a0 = a1, a2 = a3 (load_a)
        for (int lane = 0; lane < 32; ++lane) {
          addr[lane] = lanes[lane].a_chunk(kk);
          ASSERT_EQ(addr[lane] % 8, 0);
          std::memcpy(&a[lane][0], &smem[size_t(addr[lane])], 4);
          std::memcpy(&a[lane][2], &smem[size_t(addr[lane] + 4)], 4);
          a[lane][1] = a[lane][0];
          a[lane][3] = a[lane][2];
        }
        for (int half = 0; half < 2; ++half) {  // 16 lanes a pass: distinct 8-byte words in distinct banks
          std::vector<int> words(addr + 16 * half, addr + 16 * half + 16), banks;
          std::sort(words.begin(), words.end());
          words.erase(std::unique(words.begin(), words.end()), words.end());
          for (int o : words) banks.push_back((o / 8) % 16);
          std::sort(banks.begin(), banks.end());
          ASSERT_TRUE(std::adjacent_find(banks.begin(), banks.end()) == banks.end())
              << "bank conflict: chunk " << kk << " rows " << rows;
        }
      } else {
        for (int lane = 0; lane < 32; ++lane) {
          addr[lane] = lanes[lane].a_chunk(kk) + sb;
          ASSERT_EQ(addr[lane] % 16, 0);
        }
        ASSERT_TRUE(ldmatrix_conflict_free(addr)) << "A at chunk " << kk;
        ldmatrix<4>(smem, addr, a);
      }
      for (int lane = 0; lane < 32; ++lane) {
        const int g = lane >> 2, t = lane & 3;
        for (int reg = 0; reg < 4; ++reg) {
          const int row = g + 8 * (reg & 1), k = kk * 16 + 2 * t + 8 * (reg >> 1);
          // rows past M hold a row below M: f32 x row g % M for both halves, x's copy row % rows held
          const int src = row < held ? row : X == fp8g::XMode::F32 ? g % held : row % held;
          ASSERT_EQ(a[lane][reg], bf16_pair(x[size_t(src * 128 + k)], x[size_t(src * 128 + k + 1)]))
              << "lane " << lane << " reg " << reg << " chunk " << kk << " rows " << rows;
        }
      }
    }
  }
}

TEST(Fp8GemvHost, LanesLoadTheMmaAFragments) {
  for (int rows = 1; rows <= fp8g::kF32MaxRows; ++rows) check_a_fragments<8, fp8g::XMode::F32>(rows);
  check_a_fragments<3, fp8g::XMode::F32>(2);
  check_a_fragments<6, fp8g::XMode::Xb8>(8);
  check_a_fragments<4, fp8g::XMode::Xb16>(16);
  // The x pieces of a whole tile stay inside the stage's x bytes; the bf16 tiles inside the CTA's bytes.
  using B16 = fp8g::Fp8Gemv<4, fp8g::XMode::Xb16>;
  using B8 = fp8g::Fp8Gemv<4, fp8g::XMode::Xb8>;
  using F = fp8g::Fp8Gemv<8, fp8g::XMode::F32>;
  const fp8g::Fp8Layout<B16> l16{16, 10};
  const fp8g::Fp8Layout<B8> l8{8, 10};
  const fp8g::Fp8Layout<F> lf{4, 10};
  EXPECT_LE(l16.x_off(0, 0, 15, 120) + 16, l16.stage_off(0, 0) + l16.stage_bytes());
  EXPECT_LE(l8.x_off(0, 0, 7, 120) + 16, l8.stage_off(0, 0) + l8.stage_bytes());
  EXPECT_GE(lf.xh_off(0, 0, 0), lf.sc_off(F::kWarps, 0));
  EXPECT_EQ(lf.xh_off(0, 0, 0) % 16, 0);
  EXPECT_EQ(lf.smem_bytes(1), lf.xh_off(F::kWarps - 1, 3, 0) + lf.xh_row_bytes());
  EXPECT_EQ(fp8g::x_mode(4, 5), fp8g::XMode::F32);
  EXPECT_EQ(fp8g::x_mode(4, 32), fp8g::XMode::F32);
  EXPECT_EQ(fp8g::x_mode(5, 32), fp8g::XMode::Xb8);  // f32 x never past kF32MaxRows rows
}

// With x's bf16 copy of 16 rows (verify) a CTA of 3 stages fits 3 to a multiprocessor (228 KB of shared memory,
// 1 KB of it reserved a CTA, on the H100 and H200) for the 8B and 27B weights: the swizzled, unpadded stage rows
// (Fp8Gemv::kSwizzled) are what make it fit (padded, the 27B's 320-CTA launches ran 2 a multiprocessor, 1.2 waves).
TEST(Fp8GemvHost, ThreeStagesWithXsCopyFitThreeCtasAMultiprocessor) {
  using C = fp8g::Fp8Gemv<3, fp8g::XMode::Xb16>;
  constexpr int kPerCta = (228 * 1024 - 3 * 1024) / 3;
  const int64_t shapes[][2] = {{4096, 4096},  {24576, 4096}, {4096, 12288}, {5120, 17408}, {5120, 6144},
                               {10240, 5120}, {6144, 5120},  {34816, 5120}, {12288, 5120}};
  for (const auto& s : shapes) {
    const tc::KSplit split = tc::k_split(s[0], s[1], tc::split_target_ctas());
    const fp8g::Fp8Layout<C> lay{16, fp8g::scale_slots(split.S, split.cps, C::kWarps)};
    EXPECT_LE(lay.smem_bytes(split.S), kPerCta) << s[0] << "x" << s[1];
  }
  const fp8g::Fp8Layout<C> one{16, 1};
  EXPECT_EQ(one.stage_bytes(), 16 * 128 + 16 * 128 * 2);  // no pad
}

// A launch of at most `most` CTAs a multiprocessor pads its shared memory so that no more fit (launch.cuh): on the
// H100 / H200 (228 KB a multiprocessor, 1 KB reserved a CTA) 74 KB stages fit 3, padded for 2 they fit 2, for 1 one;
// never past the kernel's limit (then unpadded), never less than asked.
TEST(Fp8GemvHost, PaddedSharedMemoryCapsTheCtasAMultiprocessor) {
  constexpr int kSm = 228 * 1024, kLimit = 227 * 1024;
  auto fit = [](int smem) { return kSm / (smem + cuda::kCtaReservedSmem); };
  EXPECT_EQ(fit(74288), 3);
  for (int most : {1, 2, 3}) {
    const int s = cuda::smem_for_at_most(74288, most, kLimit, kSm);
    EXPECT_GE(s, 74288);
    EXPECT_EQ(fit(s), most) << most;
    if (s != 74288) EXPECT_EQ(s % 128, 0);  // padded: whole 128-byte lines
  }
  EXPECT_EQ(cuda::smem_for_at_most(20000, 4, kLimit, kSm), 45696);  // the least multiple of 128 that fits 4, not 5
  EXPECT_EQ(fit(45696), 4);
  EXPECT_EQ(fit(45696 - 128), 5);
  EXPECT_EQ(cuda::smem_for_at_most(20000, 1, 100000, kSm), 20000);  // past the limit: as asked
}

// Runs a warp's main loop as the kernel does (matmul_fp8_gemv_kernel.cuh: regular tiles straight, the others chunk
// by chunk, the chain switched between tiles or at its chunk) and records the chunks each chain receives: every chunk
// of [begin, end) exactly once, in increasing k, in chain 0 below split and chain 1 from it. A regular tile covers 8
// chunks, whole pieces, one slice, and the scale block of slot regular_slot(t).
struct Fed {
  std::vector<int64_t> chain[2];
  int regular = 0;
};
Fed run_warp(const tc::GemvWork& work, int whole, bool allow_regular) {
  Fed fed;
  const int tiles = static_cast<int>(work.tiles(128));
  const fp8g::RegularTiles reg = allow_regular ? fp8g::regular_tiles(work, whole) : fp8g::RegularTiles{};
  const fp8g::ScaleRun run = fp8g::scale_run(work);
  const int switch_at = fp8g::switch_tile(work);
  const int64_t switch_ch = fp8g::switch_chunk(work);
  int chain = 0;
  for (int kt = 0; kt < tiles; ++kt) {
    const int64_t ch0 = work.begin + int64_t{kt} * 8;
    if (kt == switch_at) chain = 1;  // between tiles
    if (fp8g::is_regular(reg, kt)) {
      ++fed.regular;
      EXPECT_LT(kt, whole);
      EXPECT_LE(ch0 + 8, work.end);
      EXPECT_EQ(ch0 % 8, 0);
      EXPECT_EQ(ch0 / 8 - run.first, fp8g::regular_slot(kt));
      EXPECT_TRUE(ch0 + 8 <= work.split || ch0 >= work.split);
      for (int kk = 0; kk < 8; ++kk) fed.chain[chain].push_back(ch0 + kk);
    } else {
      for (int kk = 0; kk < 8; ++kk) {
        const int64_t ch = ch0 + kk;
        if (ch >= work.end) break;
        if (ch == switch_ch) chain = 1;
        fed.chain[chain].push_back(ch);
      }
    }
  }
  return fed;
}

// For the 8B and 27B shapes and odd ones: each warp's chunks map into its scale slots, the tile's second
// scale starts where a chunk crosses a 128-k block, the main loop feeds every chunk into its slice's chain
// (with and without the straight tiles; the 8B and 27B shapes run all their tiles straight), and the layout
// of every stage count fits one CTA.
TEST(Fp8GemvHost, ScaleSlotsAndChainsCoverEveryChunkAndTheLayoutFits) {
  struct Shape {
    int64_t N, K;
    bool all_regular;
  };
  const Shape shapes[] = {{4096, 4096, true},   {1024, 4096, true},   {12288, 4096, true}, {4096, 12288, true},
                          {5120, 5120, true},   {17408, 5120, true},  {5120, 17408, true}, {257, 1001, false},
                          {130, 3, false},      {64, 12288, true},    {3000, 496, false},  {1000, 4104, false},
                          {24576, 1001, false}, {151936, 4096, true}, {640, 2064, false},  {64, 4000, false}};
  for (const Shape& s : shapes) {
    const int64_t N = s.N, K = s.K;
    const tc::KSplit split = tc::k_split(N, K, tc::split_target_ctas());
    tc::Params p;
    p.S = split.S;
    p.cps = split.cps;
    p.chunks = tc::ceil_div(K, tc::kMmaK);
    for (int warps : {4, 8}) {  // the CTA's warps (Fp8Gemv)
      const int slots = fp8g::scale_slots(p.S, p.cps, warps);
      int regular = 0, tiles_all = 0;
      for (int warp = 0; warp < warps; ++warp) {
        const tc::GemvWork work = tc::gemv_work(p, warp, warps);
        const fp8g::ScaleRun run = fp8g::scale_run(work);
        ASSERT_LE(run.count, slots) << N << "x" << K;
        for (int64_t ch = work.begin; ch < work.end; ++ch) {
          const int64_t idx = ch * 16 / 128 - run.first;
          ASSERT_TRUE(idx >= 0 && idx < run.count) << N << "x" << K << " chunk " << ch;
          const int64_t ch0 = work.begin + (ch - work.begin) / 8 * 8;  // the chunk's tile
          const bool second = ch - ch0 >= fp8g::first_of_second(ch0);
          ASSERT_EQ(ch / 8, ch0 / 8 + (second ? 1 : 0)) << N << "x" << K << " chunk " << ch;
        }
        const int tiles = static_cast<int>(work.tiles(128));
        for (int64_t n0w : {int64_t{0}, N - 16, N - 15}) {
          const int whole = fp8g::whole_tiles(work, tiles, true, n0w, N, K);
          for (bool allow : {true, false}) {
            const Fed fed = run_warp(work, whole, allow);
            std::vector<int64_t> want[2];
            for (int64_t ch = work.begin; ch < work.end; ++ch) want[ch < work.split ? 0 : 1].push_back(ch);
            ASSERT_EQ(fed.chain[0], want[0]) << N << "x" << K << " warp " << warp << " n0w " << n0w;
            ASSERT_EQ(fed.chain[1], want[1]) << N << "x" << K << " warp " << warp << " n0w " << n0w;
            if (allow && n0w == 0) {
              regular += fed.regular;
              tiles_all += tiles;
            }
            if (!allow) ASSERT_EQ(fed.regular, 0);
          }
        }
        EXPECT_EQ(fp8g::whole_tiles(work, tiles, false, 0, N, K), 0);
        EXPECT_EQ(fp8g::whole_tiles(work, tiles, true, N - 15, N, K), 0);  // the warp's 16 rows pass N
      }
      if (s.all_regular) EXPECT_EQ(regular, tiles_all) << N << "x" << K << ": every tile straight";
    }
    // The largest stage count of each form fits one CTA at its most rows, but the 8-warp f32 form's: there 8
    // stages fit at one row and 4 at four (the stage rule skips the counts that do not fit).
    auto fits = [&](auto c, int x_rows) {
      using C = decltype(c);
      const fp8g::Fp8Layout<C> lay{x_rows, fp8g::scale_slots(p.S, p.cps, C::kWarps)};
      EXPECT_LE(lay.smem_bytes(p.S), 227 * 1024) << N << "x" << K << " stages " << C::kStages;
      EXPECT_EQ(lay.stage_bytes() % 16, 0);
      EXPECT_EQ(lay.sc_off(0, 0), C::kWarps * C::kStages * lay.stage_bytes());
    };
    fits(fp8g::Fp8Gemv<8, fp8g::XMode::F32>{}, 4);
    fits(fp8g::Fp8Gemv<8, fp8g::XMode::F32, 8>{}, 1);
    fits(fp8g::Fp8Gemv<4, fp8g::XMode::F32, 8>{}, 4);
    fits(fp8g::Fp8Gemv<8, fp8g::XMode::Xb8>{}, 8);
    fits(fp8g::Fp8Gemv<8, fp8g::XMode::Xb16>{}, 16);
    fits(fp8g::Fp8Gemv<3, fp8g::XMode::F32>{}, 1);
  }
  EXPECT_EQ(fp8g::x_mode(1, 5), fp8g::XMode::F32);
  EXPECT_EQ(fp8g::x_mode(4, 5), fp8g::XMode::F32);
  EXPECT_EQ(fp8g::x_mode(5, 5), fp8g::XMode::Xb8);
  EXPECT_EQ(fp8g::x_mode(8, 5), fp8g::XMode::Xb8);
  EXPECT_EQ(fp8g::x_mode(9, 5), fp8g::XMode::Xb16);
  EXPECT_EQ(fp8g::x_mode(32, 5), fp8g::XMode::Xb16);
}

}  // namespace
}  // namespace specserve::cuda_test
