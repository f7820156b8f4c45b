// `bench serve-load --rounds` (server/load_rounds.h): each level's median and range over its rounds, the levels
// in the order they first ran, errors summed, even and odd round counts, and the table's rows.
#include <gtest/gtest.h>

#include "server/load_rounds.h"

namespace specserve::server {
namespace {

LevelResult level(int concurrency, double tokens_per_s, double ttft_p50, int errors = 0) {
  LevelResult r;
  r.concurrency = concurrency;
  r.tokens_per_s = tokens_per_s;
  r.ttft_p50 = ttft_p50;
  r.itl_p50 = ttft_p50 / 10;
  r.errors = errors;
  return r;
}

TEST(LoadRounds, MedianAndRangeOfEachLevel) {
  // Three rounds of 16 then 4 (the order of the command's --concurrency), one error in round 2 at 4.
  const std::vector<LevelResult> results{level(16, 300, 0.030),   level(4, 100, 0.010),  level(16, 240, 0.050),
                                         level(4, 130, 0.020, 1), level(16, 330, 0.040), level(4, 90, 0.015)};
  const auto s = summarize_rounds(results);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].concurrency, 16);
  EXPECT_EQ(s[0].rounds, 3);
  EXPECT_EQ(s[0].errors, 0);
  EXPECT_DOUBLE_EQ(s[0].tokens_per_s_median, 300);
  EXPECT_DOUBLE_EQ(s[0].tokens_per_s_min, 240);
  EXPECT_DOUBLE_EQ(s[0].tokens_per_s_max, 330);
  EXPECT_DOUBLE_EQ(s[0].ttft_p50_median, 0.040);
  EXPECT_DOUBLE_EQ(s[0].itl_p50_median, 0.004);
  EXPECT_EQ(s[1].concurrency, 4);
  EXPECT_EQ(s[1].errors, 1);
  EXPECT_DOUBLE_EQ(s[1].tokens_per_s_median, 100);
  EXPECT_DOUBLE_EQ(s[1].tokens_per_s_min, 90);
  EXPECT_DOUBLE_EQ(s[1].tokens_per_s_max, 130);

  // An even count takes the mean of the middle two; one round is its own median and range.
  const auto two = summarize_rounds({level(1, 10, 0.002), level(1, 20, 0.004)});
  ASSERT_EQ(two.size(), 1u);
  EXPECT_DOUBLE_EQ(two[0].tokens_per_s_median, 15);
  EXPECT_DOUBLE_EQ(two[0].ttft_p50_median, 0.003);
  const auto one = summarize_rounds({level(8, 55, 0.001)});
  EXPECT_DOUBLE_EQ(one[0].tokens_per_s_median, 55);
  EXPECT_DOUBLE_EQ(one[0].tokens_per_s_min, 55);
  EXPECT_TRUE(summarize_rounds({}).empty());

  // The table: a row per level with its rounds, median, range and spread (range over median).
  const std::string table = format_round_summary(s);
  EXPECT_NE(table.find("| 16 | 3 | 0 | 300.0 | 240.0 – 330.0 | 30.0% | 40.0 | 4.00 |"), std::string::npos) << table;
  EXPECT_NE(table.find("| 4 | 3 | 1 | 100.0 | 90.0 – 130.0 | 40.0% | 15.0 | 1.50 |"), std::string::npos) << table;
}

}  // namespace
}  // namespace specserve::server
