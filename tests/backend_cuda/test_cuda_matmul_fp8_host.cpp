// The fp8 gemv kernel's host-side pieces (backend/cuda/matmul_fp8_gemv.cuh; no GPU needed): the
// dequantisation identities its bit paths rely on, checked for every finite e4m3 code against the
// definition bf16_rn(f32_rn(e4m3 × scale)) with the PTX instructions emulated (prmt; mul.rn.bf16x2 as the
// exact product rounded once), the lanes' shared-memory reads giving exactly the mma B fragments of the
// codes the whole-tile loads put there (and without bank conflicts), the A fragment addresses, the scale
// slots covering every chunk of every warp, and the layout fitting the device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/matmul_fp8_gemv.cuh"
#include "core/dtype.h"

namespace specserve::cuda_test {
namespace {

namespace fp8g = cuda::fp8g;
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

// The kernel's fast path for code c in the low half of a pair (byte 1 of y), as dequant_pair_fast.
uint16_t fast(int code, float scale) {
  const uint32_t p = fp8g::fp8_pair_bits(uint32_t(code) << 8);
  const uint32_t sp = fp8g::fp8_scale_pair(bits_of(scale));
  return mul_bf16(static_cast<uint16_t>(p & 0xffffu), static_cast<uint16_t>(sp & 0xffffu));
}
// The bit path (dequant_bits2): the pair bits widened, × 2^120, × scale in f32, rounded to bf16.
uint16_t bit_path(int code, float scale) {
  const uint32_t p = fp8g::fp8_pair_bits(uint32_t(code) << 24);  // the high half this time
  const float v = float_of(p & 0xffff0000u) * std::ldexp(1.0f, 120);
  return f32_to_bf16(v * scale);
}

TEST(Fp8GemvHost, PairBitsAreTheCodesTimesTwoToTheMinus120) {
  for (int c = 0; c < 256; ++c) {
    if (is_nan_code(c)) continue;
    const double want = std::ldexp(double(e4m3_to_f32(static_cast<uint8_t>(c))), -120);
    const uint32_t both = fp8g::fp8_pair_bits(uint32_t(c) << 8 | uint32_t(c ^ 0x80) << 24 | 0x00ff00ffu);
    EXPECT_EQ(double(bf16_to_f32(static_cast<uint16_t>(both & 0xffffu))), want) << "code " << c;
    EXPECT_EQ(double(bf16_to_f32(static_cast<uint16_t>(both >> 16))), -want) << "code " << (c ^ 0x80);
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

// Whole-tile loads of a random 16-row code block into a stage, then every lane's reads: y (bytes 1, 3) and
// y << 8 hold the B fragment's codes of k 2t, 2t + 1 and 2t + 8, 2t + 9 of weight row g (+ 8 for the second
// n8 tile) in chunk c; the conversion path's halves hold the same codes. The words one load instruction
// reads sit in distinct banks (lanes reading the same word share it).
template <int St, fp8g::XMode X>
void check_fragments(int x_rows) {
  using C = fp8g::Fp8Gemv<St, X>;
  const fp8g::Fp8Layout<C> lay{x_rows, fp8g::scale_slots(8, 32)};
  const int64_t ldq = 4096 + 16;
  std::mt19937 rng(uint32_t(St * 7 + int(X)));
  std::vector<uint8_t> w(size_t(16 * ldq));
  for (auto& b : w) b = static_cast<uint8_t>(rng());
  std::vector<uint8_t> smem(size_t(lay.smem_bytes(8)), 0);
  const int64_t begin = 40;  // chunks: a run starting inside a scale block
  for (int warp = 0; warp < C::kWarps; ++warp)
    for (int tile = 0; tile < 3; ++tile) {
      const int stage = tile % St, sb = stage * lay.stage_bytes();
      for (int lane = 0; lane < 32; ++lane) {
        const auto l = fp8g::fp8_lane(lay, warp, lane, /*n0w=*/0, ldq, begin, /*m0=*/0, /*ldx=*/4096 + 128, 16);
        for (int j = 0; j < 4; ++j)
          std::memcpy(&smem[size_t(l.q_dst + sb + j * 4 * C::kSQ)], &w[size_t(l.q_src + tile * 128 + j * 4 * ldq)], 16);
      }
      for (int nt = 0; nt < 2; ++nt)
        for (int c = 0; c < C::kChunks; ++c) {
          std::vector<int> words[2];  // the byte offsets one w0 / w1 load instruction reads
          for (int lane = 0; lane < 32; ++lane) {
            const auto l = fp8g::fp8_lane(lay, warp, lane, 0, ldq, begin, 0, 4096 + 128, 16);
            const int off = l.q_rd + sb + nt * 8 * C::kSQ + c * tc::kMmaK;
            words[0].push_back(off);
            words[1].push_back(off + 8);
            uint32_t w0, w1;
            std::memcpy(&w0, &smem[size_t(off)], 4);
            std::memcpy(&w1, &smem[size_t(off + 8)], 4);
            const int g = lane >> 2, t = lane & 3;
            const uint8_t* row = &w[size_t((g + 8 * nt) * ldq + begin * 16 + tile * 128 + c * 16)];
            const uint32_t y = fp8g::prmt(w0, w1, l.sel), y8 = y << 8;
            const std::string where = "lane " + std::to_string(lane) + " chunk " + std::to_string(c) + " tile " +
                                      std::to_string(nt) + " warp " + std::to_string(warp);
            ASSERT_EQ((y >> 8) & 0xffu, row[2 * t]) << where;
            ASSERT_EQ(y >> 24, row[2 * t + 1]) << where;
            ASSERT_EQ((y8 >> 8) & 0xffu, row[2 * t + 8]) << where;
            ASSERT_EQ(y8 >> 24, row[2 * t + 9]) << where;
            ASSERT_EQ((w0 >> l.shift) & 0xffffu, uint32_t(row[2 * t]) | uint32_t(row[2 * t + 1]) << 8) << where;
            ASSERT_EQ((w1 >> l.shift) & 0xffffu, uint32_t(row[2 * t + 8]) | uint32_t(row[2 * t + 9]) << 8) << where;
          }
          for (auto& ws : words) {  // distinct words of one load in distinct banks (equal words are broadcast)
            std::sort(ws.begin(), ws.end());
            ws.erase(std::unique(ws.begin(), ws.end()), ws.end());
            std::vector<int> banks;
            for (int o : ws) banks.push_back((o / 4) % 32);
            std::sort(banks.begin(), banks.end());
            ASSERT_TRUE(std::adjacent_find(banks.begin(), banks.end()) == banks.end())
                << "bank conflict: chunk " << c << " tile " << nt << " warp " << warp;
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

// The A fragments: f32 x pairs at (row g, k 2t) (row 0 for rows past M, which the kernel zeroes), ldmatrix
// rows 0-15 / 0-7 with their k halves; whole-tile x pieces inside the stage's x region.
TEST(Fp8GemvHost, LanesAddressTheAFragments) {
  using F = fp8g::Fp8Gemv<4, fp8g::XMode::F32>;
  const fp8g::Fp8Layout<F> lf{3, 10};
  for (int lane = 0; lane < 32; ++lane) {
    const auto l = fp8g::fp8_lane(lf, 2, lane, 0, 4096, 0, 0, 4096, 3);
    const int g = lane >> 2, t = lane & 3;
    EXPECT_EQ(l.a_row, g < 3);
    EXPECT_EQ(l.a_off, lf.x_off(2, 0, g < 3 ? g : 0, 2 * t));
    EXPECT_EQ(l.x_dst, lf.x_off(2, 0, 0, 4 * lane));
  }
  using B16 = fp8g::Fp8Gemv<4, fp8g::XMode::Xb16>;
  using B8 = fp8g::Fp8Gemv<4, fp8g::XMode::Xb8>;
  const fp8g::Fp8Layout<B16> l16{16, 10};
  const fp8g::Fp8Layout<B8> l8{8, 10};
  for (int lane = 0; lane < 32; ++lane) {
    EXPECT_EQ(fp8g::fp8_lane(l16, 1, lane, 0, 4096, 0, 0, 4224, 16).a_off,
              l16.x_off(1, 0, tc::a_ldsm(lane).row, tc::a_ldsm(lane).col));
    EXPECT_EQ(fp8g::fp8_lane(l8, 1, lane, 0, 4096, 0, 0, 4224, 8).a_off,
              l8.x_off(1, 0, lane & 7, ((lane >> 3) & 1) * 8));
  }
  // The x pieces of a whole tile (rows lane / 16 + 2i) stay inside the stage's x bytes.
  EXPECT_LE(l16.x_off(0, 0, 15, 120) + 16, l16.stage_off(0, 0) + l16.stage_bytes());
  EXPECT_LE(l8.x_off(0, 0, 7, 120) + 16, l8.stage_off(0, 0) + l8.stage_bytes());
}

// For the 8B and 27B shapes and odd ones: each warp's chunks map into its scale slots, the tile's second
// scale starts where a chunk crosses a 128-k block, and the layout of every stage count fits one CTA.
TEST(Fp8GemvHost, ScaleSlotsCoverEveryChunkAndTheLayoutFits) {
  const int64_t shapes[][2] = {{4096, 4096},  {1024, 4096},  {12288, 4096}, {4096, 12288}, {5120, 5120},
                               {17408, 5120}, {5120, 17408}, {257, 1001},   {130, 3},      {64, 12288},
                               {3000, 496},   {1000, 4104},  {24576, 1001}, {151936, 4096}};
  for (const auto& s : shapes) {
    const int64_t N = s[0], K = s[1];
    const tc::KSplit split = tc::k_split(N, K, tc::split_target_ctas());
    tc::Params p;
    p.S = split.S;
    p.cps = split.cps;
    p.chunks = tc::ceil_div(K, tc::kMmaK);
    const int slots = fp8g::scale_slots(p.S, p.cps);
    for (int warp = 0; warp < 4; ++warp) {
      const tc::GemvWork work = tc::gemv_work(p, warp);
      const fp8g::ScaleRun run = fp8g::scale_run(work);
      ASSERT_LE(run.count, slots) << N << "x" << K;
      for (int64_t ch = work.begin; ch < work.end; ++ch) {
        const int64_t idx = ch * 16 / 128 - run.first;
        ASSERT_TRUE(idx >= 0 && idx < run.count) << N << "x" << K << " chunk " << ch;
        const int64_t ch0 = work.begin + (ch - work.begin) / 8 * 8;  // the chunk's tile
        const bool second = ch - ch0 >= fp8g::first_of_second(ch0);
        ASSERT_EQ(ch / 8, ch0 / 8 + (second ? 1 : 0)) << N << "x" << K << " chunk " << ch;
      }
    }
    auto fits = [&](auto c, int x_rows) {
      using C = decltype(c);
      const fp8g::Fp8Layout<C> lay{x_rows, slots};
      EXPECT_LE(lay.smem_bytes(p.S), 227 * 1024) << N << "x" << K << " stages " << C::kStages;
      EXPECT_EQ(lay.stage_bytes() % 16, 0);
      EXPECT_EQ(lay.sc_off(0, 0), C::kWarps * C::kStages * lay.stage_bytes());
    };
    fits(fp8g::Fp8Gemv<8, fp8g::XMode::F32>{}, 4);
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
