// The prefill GEMM's tile width (backend/matmul_prefill_tile.h) as a table: the width each launch of the
// Qwen3-8B and Qwen3.6-27B prefill projections gets on an H200 (132 SMs), the edges of the rule, and the
// rule against its own definition (the best rate x mean wave efficiency over the reference rows). The
// expected widths were worked out by hand from the tile counts written beside them. Runs without a GPU.
#include <gtest/gtest.h>

#include <iterator>
#include <string>
#include <vector>

#include "backend/matmul_prefill_tile.h"
#include "core/error.h"

using namespace specserve;

namespace {

constexpr int kH200 = 132;

struct Launch {
  const char* what;
  std::vector<int64_t> N;  // the launch's weights (1-4 sharing x)
  int64_t K;
  int sms;
  int width;  // expected
};

int pick(const Launch& l) { return prefill_tile_n(l.N.data(), static_cast<int>(l.N.size()), l.K, l.sms); }

double score(const std::vector<int64_t>& N, int width, int sms) {
  double eff = 0;
  for (int64_t rows : kPrefillReferenceRows)
    eff += prefill_wave_efficiency(N.data(), static_cast<int>(N.size()), rows, width, sms);
  return prefill_tile_rate(width) * eff / static_cast<double>(std::size(kPrefillReferenceRows));
}

// Tiles of 128 rows at 2,048 rows (16 row tiles), 4,096 (32), and their waves of 132 SMs.
const std::vector<Launch>& table() {
  static const std::vector<Launch> t = {
      // Qwen3-8B (hidden 4096, q 32 x 128, k / v 8 x 128, MLP 12288): 256 everywhere, waves already 97 % full.
      {"8B q+k+v", {4096, 1024, 1024}, 4096, kH200, 256},  // 24 x 16 = 384 tiles, 2.91 waves
      {"8B o_proj", {4096}, 4096, kH200, 256},             // 256 tiles, 1.94 waves (160: 416, 3.15 waves)
      {"8B down", {4096}, 12288, kH200, 256},
      {"8B gate+up as two weights", {12288, 12288}, 4096, kH200, 256},  // 1,536 tiles, 11.6 waves
      // Qwen3.6-27B (hidden 5120; q 24 x 256 with its gate = 12288, k / v 4 x 256; DeltaNet in_proj qkv
      // 10240, z 6144, b / a 48, out_proj K 6144; MLP 17408).
      {"27B q+k+v", {12288, 1024, 1024}, 5120, kH200, 256},                // 896 tiles, 6.79 waves
      {"27B in_proj qkv+z+b+a", {10240, 6144, 48, 48}, 5120, kH200, 256},  // 1,056 tiles, 8.00 waves
      {"27B gate+up as two weights", {17408, 17408}, 5120, kH200, 256},
      // N = 5,120: 256 columns make 320 tiles at 2,048 rows, 2.42 waves (81 % of the SM time computes);
      // 160 columns 512 tiles, 3.88 waves (97 %); at 4,096 rows both 97 %.
      {"27B o_proj", {5120}, 6144, kH200, 160},
      {"27B out_proj", {5120}, 6144, kH200, 160},
      {"27B down", {5120}, 17408, kH200, 160},
      // Edges: 3,072 columns (192: 16 x 16 = 256 tiles, 1.94 waves; 256: 192 tiles, 1.45 waves); 1,000
      // columns (64 tiles of 256 or 128 of 128 at 2,048 rows: one wave either way, and a 128-column tile takes
      // about half the time); a lone narrow weight (one tile column at any width: the narrowest); 5,120 on 114
      // SMs (256: 320 tiles in 3 waves, 94 %; 160: 512 in 5, 90 %) and on 78 SMs.
      {"3072 columns", {3072}, 4096, kH200, 192},
      {"1000 columns", {1000}, 4096, kH200, 128},
      {"48 columns", {48}, 5120, kH200, 128},
      {"5120 on 114 SMs", {5120}, 5120, 114, 256},
      {"5120 on 78 SMs", {5120}, 5120, 78, 160},
  };
  return t;
}

TEST(PrefillTileWidth, TheModelsProjectionsGetTheirWidths) {
  for (const Launch& l : table()) EXPECT_EQ(pick(l), l.width) << l.what;
}

// K is in the signature (the contract allows N and K) but every width runs all of K per tile: the choice is
// the same for any K. And no M in the signature at all: a prefill row's kernel never depends on its chunk.
TEST(PrefillTileWidth, KDoesNotChangeTheWidth) {
  for (const Launch& l : table())
    for (int64_t K : {int64_t{8}, int64_t{64}, int64_t{1000}, int64_t{100000}})
      EXPECT_EQ(prefill_tile_n(l.N.data(), static_cast<int>(l.N.size()), K, l.sms), l.width) << l.what << " K " << K;
}

TEST(PrefillTileWidth, TheChoiceIsTheBestScoreWidestOnATie) {
  const std::vector<std::vector<int64_t>> sets = {{1},
                                                  {8},
                                                  {100},
                                                  {256},
                                                  {1000},
                                                  {2048},
                                                  {3072},
                                                  {5120},
                                                  {6144},
                                                  {7000},
                                                  {17408},
                                                  {151936},
                                                  {4096, 1024, 1024},
                                                  {10240, 6144, 48, 48}};
  for (int sms : {1, 16, 78, 114, 132, 144})
    for (const auto& N : sets) {
      const int w = prefill_tile_n(N.data(), static_cast<int>(N.size()), 4096, sms);
      ASSERT_TRUE(prefill_tile_width_valid(w));
      for (int other : kPrefillTileWidths) {  // a wider width scores less, a narrower one no more
        const double mine = score(N, w, sms), theirs = score(N, other, sms);
        EXPECT_TRUE(other > w ? theirs < mine : theirs <= mine) << N[0] << " on " << sms << " SMs: " << other;
      }
    }
}

TEST(PrefillTileWidth, WaveEfficiencyCountsIdleSmsAndPartialTiles) {
  const int64_t n5120 = 5120, n1000 = 1000, n256 = 256;
  // 320 tiles in 3 waves of 132; 512 tiles in 4 waves.
  EXPECT_DOUBLE_EQ(prefill_wave_efficiency(&n5120, 1, 2048, 256, 132), 320.0 / 396.0);
  EXPECT_DOUBLE_EQ(prefill_wave_efficiency(&n5120, 1, 2048, 160, 132), 512.0 / 528.0);
  // 4 tiles of 256 columns for 1,000 in one wave of 132.
  EXPECT_DOUBLE_EQ(prefill_wave_efficiency(&n1000, 1, 128, 256, 132), 1000.0 / (132.0 * 256.0));
  // 100 rows of a 128-row tile on one SM.
  EXPECT_DOUBLE_EQ(prefill_wave_efficiency(&n256, 1, 100, 256, 1), 100.0 / 128.0);
  // Several weights: their tiles share the waves (4096 + 1024 + 1024 at 2,048 rows: 384 tiles, 3 waves).
  const int64_t qkv[] = {4096, 1024, 1024};
  EXPECT_DOUBLE_EQ(prefill_wave_efficiency(qkv, 3, 2048, 256, 132), 384.0 / 396.0);
}

TEST(PrefillTileWidth, RatesAndWidths) {
  for (int w : kPrefillTileWidths) {
    EXPECT_TRUE(prefill_tile_width_valid(w));
    EXPECT_GT(prefill_tile_rate(w), 0.5);
    EXPECT_LE(prefill_tile_rate(w), 1.0);
  }
  EXPECT_EQ(prefill_tile_rate(256), 1.0);
  for (int w : {0, 64, 200, 512}) {
    EXPECT_FALSE(prefill_tile_width_valid(w));
    EXPECT_THROW(prefill_tile_rate(w), Error);
  }
}

TEST(PrefillTileWidth, BadInputIsAClearError) {
  const int64_t n = 5120, zero = 0;
  EXPECT_THROW(prefill_tile_n(&n, 0, 4096, kH200), Error);
  EXPECT_THROW(prefill_tile_n(&zero, 1, 4096, kH200), Error);
  EXPECT_THROW(prefill_tile_n(n, 0, kH200), Error);
  EXPECT_THROW(prefill_tile_n(n, 4096, 0), Error);
  EXPECT_THROW(prefill_wave_efficiency(&n, 1, 0, 256, kH200), Error);
  EXPECT_THROW(prefill_wave_efficiency(&n, 1, 2048, 100, kH200), Error);
}

}  // namespace
