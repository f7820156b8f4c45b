// `specserve bench serve-load --rounds N` through the real command on the demo target (CPU): the levels run N
// times in turn, the per-level table has a row per level and round, and the summary gives each level's rounds,
// errors and median (server/load_rounds.h; its arithmetic: tests/server/test_load_rounds.cpp).
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "../specserve_cli.h"

namespace specserve::cli {
namespace {

const std::string kTarget = std::string(SPECSERVE_SOURCE_DIR) + "/models/demo-coder/target";

// The Markdown rows of `out` whose first two cells are (a, b).
int rows_starting(const std::string& out, const std::string& a, const std::string& b) {
  int n = 0;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("| " + a + " | " + b + " |", 0) == 0) ++n;
  return n;
}

TEST(BenchServeLoadRounds, LevelsRunInTurnAndTheSummaryCountsThem) {
  ASSERT_TRUE(std::filesystem::exists(kTarget + "/config.json")) << kTarget;
  const testing::CliRun r = testing::run_specserve("bench serve-load --model " + kTarget +
                                                   " --rounds 3 --concurrency 2,1 --requests 2 --max-tokens 6 "
                                                   "--prompt-words 16 --threads 2 --temperature 0");
  ASSERT_EQ(r.status, 0) << r.out;
  const size_t summary = r.out.find("over 3 rounds");
  ASSERT_NE(summary, std::string::npos) << r.out;
  const std::string levels = r.out.substr(0, summary), totals = r.out.substr(summary);
  // Per level and round: concurrency, then the 2 requests sent.
  EXPECT_EQ(rows_starting(levels, "2", "2"), 3) << r.out;
  EXPECT_EQ(rows_starting(levels, "1", "2"), 3) << r.out;
  // Summary: concurrency, 3 rounds, then 0 errors; in the order the levels ran.
  EXPECT_EQ(rows_starting(totals, "2", "3"), 1) << r.out;
  EXPECT_EQ(rows_starting(totals, "1", "3"), 1) << r.out;
  EXPECT_LT(totals.find("| 2 | 3 | 0 |"), totals.find("| 1 | 3 | 0 |")) << r.out;

  // One round (the default) prints no summary.
  const testing::CliRun once = testing::run_specserve("bench serve-load --model " + kTarget +
                                                      " --concurrency 1 --requests 1 --max-tokens 4 --prompt-words 8 "
                                                      "--threads 2");
  ASSERT_EQ(once.status, 0) << once.out;
  EXPECT_EQ(once.out.find("rounds"), std::string::npos) << once.out;
}

}  // namespace
}  // namespace specserve::cli
