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

using Edges = std::vector<CalibrationEdge>;

TEST(StepCostPlan, TimesOneRowPastEachKernelsRange) {
  const CalibrationPlan p = calibration_plan("cuda", 64, 15);  // rows per sequence up to 16
  // The fewest sequences of at most 16 rows: 33 = 3 x 11, 65 = 5 x 13, 129 = 9 x 14 + 3 (three of them 15
  // rows), 257 = 17 x 15 + 2.
  EXPECT_EQ(p.edges, (Edges{{3, 11, 0}, {5, 13, 0}, {9, 14, 3}, {17, 15, 2}}));
  std::set<int64_t> rows;
  for (const CalibrationEdge& e : p.edges) {
    rows.insert(e.rows());
    EXPECT_LT(e.extra, e.batch);
    EXPECT_LE(e.k + (e.extra > 0 ? 1 : 0), 16);
  }
  EXPECT_EQ(rows, (std::set<int64_t>{kGemvMaxRows + 1, kMidMaxRows + 1, kWgmmaSerialTile + 1, kWgmmaTmaMaxRows + 1}));
  // The row counts the other steps time: the knots on the near side of each jump are there already.
  std::set<int64_t> others;
  for (int b : p.batches)
    for (int k : p.ks) others.insert(int64_t{b} * k);
  EXPECT_TRUE(others.contains(kGemvMaxRows) && others.contains(kMidMaxRows) && others.contains(kWgmmaSerialTile));
}

TEST(StepCostPlan, EdgesWithinTheSequencesAndRowsAllowed) {
  // Drafts of at most 3 (4 rows a sequence): 33 = 9 x 3 + 6, 65 = 17 x 3 + 14, 129 = 33 x 3 + 30;
  // 257 needs 65 sequences, more than 64.
  EXPECT_EQ(calibration_plan("cuda", 64, 3).edges, (Edges{{9, 3, 6}, {17, 3, 14}, {33, 3, 30}}));
  EXPECT_EQ(calibration_plan("cuda", 65, 3).edges, (Edges{{9, 3, 6}, {17, 3, 14}, {33, 3, 30}, {65, 3, 62}}));
  // Sixteen sequences of up to 16 rows reach 129 (9 sequences) but not 257 (17).
  EXPECT_EQ(calibration_plan("cuda", 16, 15).edges, (Edges{{3, 11, 0}, {5, 13, 0}, {9, 14, 3}}));
  // Four sequences: 33 = 3 x 11, but 65 = 5 x 13 needs five.
  EXPECT_EQ(calibration_plan("cuda", 4, 15).edges, (Edges{{3, 11, 0}}));
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
