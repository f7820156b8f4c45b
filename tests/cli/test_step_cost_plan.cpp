// The step cost calibration's plan (cli/step_cost_calibration.h): on a device it times a step of exactly
// one row more than each matmul kernel's row range (backend/matmul_choice.h), with the fewest sequences
// that make that row count within --max-seqs and the drafts' rows, so the fitted row share has a knot on
// each side of the jump; on the CPU (one kernel family) it does not. The KV blocks it reserves cover
// those steps' sequences.
#include <gtest/gtest.h>

#include <set>

#include "backend/matmul_choice.h"
#include "cli/step_cost_calibration.h"

namespace specserve::cli {
namespace {

using Edges = std::vector<std::pair<int, int>>;

TEST(StepCostPlan, TimesOneRowPastEachKernelsRange) {
  const CalibrationPlan p = calibration_plan("cuda", 64, 15);  // rows per sequence up to 16
  // 129 = 43 x 3; 257 is prime: 257 sequences of one row, more than 64.
  EXPECT_EQ(p.edges, (Edges{{3, 11}, {5, 13}, {43, 3}}));
  std::set<int64_t> rows;
  for (const auto& [b, k] : p.edges) rows.insert(int64_t{b} * k);
  EXPECT_EQ(rows, (std::set<int64_t>{kGemvMaxRows + 1, kMidMaxRows + 1, kWgmmaSerialTile + 1}));
  // The row counts the other steps time: the knots on the near side of each jump are there already.
  std::set<int64_t> others;
  for (int b : p.batches)
    for (int k : p.ks) others.insert(int64_t{b} * k);
  EXPECT_TRUE(others.contains(kGemvMaxRows) && others.contains(kMidMaxRows) && others.contains(kWgmmaSerialTile));
}

TEST(StepCostPlan, EdgesWithinTheSequencesAndRowsAllowed) {
  // Drafts of at most 3 (4 rows a sequence): 33 = 11 x 3; 65 needs 65 sequences, more than 64.
  // 129 = 43 x 3 needs 43 sequences of 3 rows; 257 sequences of one row fit 300.
  EXPECT_EQ(calibration_plan("cuda", 64, 3).edges, (Edges{{11, 3}, {43, 3}}));
  EXPECT_EQ(calibration_plan("cuda", 65, 3).edges, (Edges{{11, 3}, {65, 1}, {43, 3}}));
  EXPECT_EQ(calibration_plan("cuda", 300, 3).edges, (Edges{{11, 3}, {65, 1}, {43, 3}, {257, 1}}));
  // Four sequences: 33 = 3 x 11, but 65 = 5 x 13 needs five.
  EXPECT_EQ(calibration_plan("cuda", 4, 15).edges, (Edges{{3, 11}}));
  EXPECT_TRUE(calibration_plan("cpu", 64, 15).edges.empty());
}

TEST(StepCostPlan, KvBlocksCoverTheEdgeSteps) {
  CalibrationPlan p = calibration_plan("cuda", 64, 15);
  p.batches = {1};  // fewer sequences than the 65-row step's five, and no long-context batch of four
  p.decode_batches.clear();
  p.short_context = p.long_context = 2048;
  const int64_t with = kv_blocks_needed(p, 2048);
  p.edges.clear();
  EXPECT_GT(with, kv_blocks_needed(p, 2048));
}

}  // namespace
}  // namespace specserve::cli
