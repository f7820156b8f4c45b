// A row share that jumps where a matmul kernel's row range ends (64 rows: the 8B shape on an H200 took
// 10.1 ms for a 64-sequence decode step, 16.8 ms with four probes of three drafts): fitted from timings
// with a knot on each side of the jump (what the calibration times, cli/step_cost_calibration.h), the
// model prices a step past it with the jump, and the probe budget (DraftLengthPolicy::afford_probes)
// then spaces 64-sequence probes by what they really cost; fitted without the knot past the jump, the
// model interpolates across it and charges such a probe a fraction of that.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/draft_length_policy.h"
#include "engine/step_cost_model.h"
#include "milliseconds.h"

namespace specserve::engine {
namespace {

// The truth: the row share is 10 ms up to 64 rows (rising slowly), then 16.5 ms from 65, rising 0.06 ms a
// row; small per-sequence and per-position terms; a propose 1.2 ms + 0.06 ms a sequence.
double true_row_ms(double rows) { return rows <= 64 ? 9.0 + rows / 64 : 16.5 + 0.06 * (rows - 65); }
double true_step_ms(double rows, double sequences, double context_sum, double extra_row_context_sum) {
  return true_row_ms(rows) + 0.02 * sequences + 1e-5 * context_sum + 2e-6 * extra_row_context_sum;
}
double true_propose_ms(double sequences) { return 1.2 + 0.06 * sequences; }

// Timed as the calibration times them on a device (cli/step_cost_calibration.h): B in 1, 4, 16, 64 and K in
// 1, 2, 4, 8, 16 at 256 positions, decode at 128 and 256 sequences, B in 1, 4 and K in 1, 16 at 4,096
// positions; and, with `edges`, 3 x 11 and 5 x 13 rows (one past the gemv and mid kernels' ranges).
StepCosts fitted(bool edges) {
  std::vector<StepTiming> steps;
  auto time = [&](int b, int k, int64_t context) {
    const double c = double(context);
    steps.push_back({b, k, context, true_step_ms(b * k, b, b * c, b * (k - 1) * c) * kMs});
  };
  for (int b : {1, 4, 16, 64})
    for (int k : {1, 2, 4, 8, 16}) time(b, k, 256);
  for (int b : {128, 256}) time(b, 1, 256);
  if (edges) time(3, 11, 256), time(5, 13, 256);
  for (int b : {1, 4})
    for (int k : {1, 16}) time(b, k, 4096);
  std::vector<ProposeTiming> proposes;
  for (int b : {1, 4, 16, 64}) proposes.push_back({b, 256, true_propose_ms(b) * kMs});
  return fit_step_costs(steps, proposes);
}

// A 64-sequence decode step at 256 positions with four probes of three drafts: 76 rows.
constexpr double kProbeRows = 76, kContext = 256;
double step_ms(const StepCostModel& m, double rows) {
  return m.step_seconds(rows, 64, 64 * kContext, (rows - 64) * kContext) / kMs;
}

TEST(StepCostJump, TheKnotPastAKernelsRangePricesTheJump) {
  const StepCostModel with(fitted(true)), without(fitted(false));
  const double truth = true_step_ms(kProbeRows, 64, 64 * kContext, (kProbeRows - 64) * kContext);
  std::printf("a 64-sequence step with four probes: %.2f ms, priced %.2f ms with the knot past 64 rows, %.2f without\n",
              truth, step_ms(with, kProbeRows), step_ms(without, kProbeRows));
  EXPECT_NEAR(step_ms(with, kProbeRows), truth, 0.02 * truth);
  EXPECT_NEAR(step_ms(with, 64), true_step_ms(64, 64, 64 * kContext, 0), 0.02 * true_step_ms(64, 64, 64 * kContext, 0));
  EXPECT_LT(step_ms(without, kProbeRows), 0.8 * truth) << "interpolated across the jump";
}

// Probes at 64 sequences: how many probe steps the budget affords follows the priced cost.
int probes_afforded(const StepCostModel& model, int steps) {
  EngineMetrics metrics;
  EngineOptions options;
  options.draft_policy = DraftPolicy::Adaptive;
  options.step_costs = model.costs();
  DraftLengthPolicy policy(options, metrics);
  int afforded = 0;
  for (int t = 0; t < steps; ++t) {
    std::vector<DraftCandidate> c(64);
    for (size_t i = 0; i < c.size(); ++i) {
      c[i].max_drafts = 15;
      c[i].min_drafts = i < 4 ? 3 : 0;
      c[i].context = static_cast<int64_t>(kContext);
      c[i].accept.assign(15, 0.02);
    }
    afforded += policy.afford_probes(c) > 0;
  }
  return afforded;
}

TEST(StepCostJump, ProbesPastTheJumpAreChargedForIt) {
  const StepCostModel with(fitted(true)), without(fitted(false));
  const int steps = 1000;
  // What the budget allows by the true costs: the first probe step (free), then kProbeBudget of the plain
  // steps' time, each probe step costing its extra rows and its propose.
  const double plain = true_step_ms(64, 64, 64 * kContext, 0);
  const double probe =
      true_step_ms(kProbeRows, 64, 64 * kContext, (kProbeRows - 64) * kContext) - plain + true_propose_ms(4);
  const double fair = 1 + DraftLengthPolicy::kProbeBudget * steps * plain / probe;
  const int priced = probes_afforded(with, steps), cheap = probes_afforded(without, steps);
  std::printf("probe steps in %d: %d with the jump priced, %d without (the budget's share: %.1f)\n", steps, priced,
              cheap, fair);
  EXPECT_NEAR(priced, fair, 0.1 * fair + 1);
  EXPECT_GT(cheap, 1.3 * fair);
}

// The 128-row tile: 16 sequences of 8 rows run one 128-row tile of the verify matmul, 16 of 9 two (the 8B
// on an H200: ~10.5 ms at 128 rows, ~14 ms at 137-156 in a controlled run at 16 sequences). A calibration
// at 16 sequences cannot make 129 rows of equal sequences (129 = 3 x 43), so its edge step is 9 sequences,
// three of 15 rows and six of 14 (CalibrationEdge); with that knot the fit prices 16 x 9 rows with the
// jump, without it the model interpolates between 128 and 256 rows.
double true_tile_ms(double rows) { return rows <= 128 ? 9.5 + rows / 128 : 13.5 + 2.5 * (rows - 129) / 127; }

StepCosts fitted_tiles(bool edge) {
  std::vector<StepTiming> steps;
  auto time = [&](int b, int k, int extra, int64_t context) {
    const double c = double(context), rows = double(b) * k + extra;
    const double ms = true_tile_ms(rows) + 0.02 * b + 1e-5 * b * c + 2e-6 * (rows - b) * c;
    steps.push_back({b, k, context, ms * kMs, extra});
  };
  for (int b : {1, 4, 16})
    for (int k : {1, 2, 4, 8, 16}) time(b, k, 0, 256);
  if (edge) time(9, 14, 3, 256);
  for (int b : {1, 4})
    for (int k : {1, 16}) time(b, k, 0, 4096);
  return fit_step_costs(steps, {});
}

TEST(StepCostJump, AnUnevenEdgeStepPricesTheSecondTile) {
  const StepCostModel with(fitted_tiles(true)), without(fitted_tiles(false));
  auto ms = [](const StepCostModel& m, int k) { return m.uniform_step_seconds(16, k, 256) / kMs; };
  const double truth = true_tile_ms(144) + 0.02 * 16 + 1e-5 * 16 * 256 + 2e-6 * 128 * 256;
  std::printf("16 x 9 rows: %.2f ms, priced %.2f ms with the 9 x 14 + 3 edge, %.2f without\n", truth, ms(with, 9),
              ms(without, 9));
  EXPECT_NEAR(ms(with, 9), truth, 0.03 * truth);
  EXPECT_LT(ms(without, 9), 0.85 * truth) << "interpolated across the tile";
  // The extra rows' context term is counted: the edge's Σ (k_i - 1)·c_i is (9 x 13 + 3)·c.
  const StepTiming edge{9, 14, 256, 1.0, 3};
  EXPECT_EQ(edge.rows(), 129);
  EXPECT_EQ(edge.extra_row_context_sum(), (9.0 * 13 + 3) * 256);
}

}  // namespace
}  // namespace specserve::engine
