// The step cost model's fit (engine/step_cost_model.h, fit_step_costs): it recovers the coefficients of
// its own form, the per-draft propose term included, and keeps its terms non-negative and the row share
// rising on noisy timings.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "engine/step_cost_model.h"

namespace specserve::engine {
namespace {

constexpr double kMs = 1e-3;

TEST(StepCostModel, FitRecoversTheCoefficientsOfItsOwnForm) {
  StepCosts truth;
  truth.row_knots = {1, 2, 4, 8, 16, 32, 64, 128, 256};
  for (double r : truth.row_knots) truth.row_seconds.push_back((6 + 0.03 * std::max(0.0, r - 24)) * kMs);
  truth.sequence_s = 0.02 * kMs;
  truth.context_s = 2e-5 * kMs;
  truth.row_context_s = 3e-6 * kMs;
  truth.propose_s = 0.4 * kMs;
  truth.propose_sequence_s = 0.05 * kMs;
  truth.propose_context_s = 1e-6 * kMs;
  truth.propose_draft_s = 0.03 * kMs;
  const StepCostModel model(truth);
  std::vector<StepTiming> steps;
  std::vector<ProposeTiming> proposes;
  for (int context : {256, 4096})
    for (int b : {1, 4, 16})
      for (int k : {1, 2, 4, 8, 16}) steps.push_back({b, k, context, model.uniform_step_seconds(b, k, context)});
  for (int context : {256, 4096})
    for (int b : {1, 4, 16})
      proposes.push_back({b, context, model.propose_seconds(b, double(b) * context, b * 15.0), 15});
  // The calibration's propose with one draft a sequence (the largest batch) tells the per-draft term apart.
  proposes.push_back({16, 256, model.propose_seconds(16, 16 * 256.0, 16), 1});
  const StepCostModel fitted(fit_step_costs(steps, proposes));
  EXPECT_NEAR(fitted.costs().sequence_s, truth.sequence_s, 1e-3 * truth.sequence_s);
  EXPECT_NEAR(fitted.costs().context_s, truth.context_s, 1e-3 * truth.context_s);
  EXPECT_NEAR(fitted.costs().row_context_s, truth.row_context_s, 1e-3 * truth.row_context_s);
  EXPECT_NEAR(fitted.costs().propose_s, truth.propose_s, 1e-3 * truth.propose_s);
  EXPECT_NEAR(fitted.costs().propose_sequence_s, truth.propose_sequence_s, 1e-3 * truth.propose_sequence_s);
  EXPECT_NEAR(fitted.costs().propose_draft_s, truth.propose_draft_s, 1e-3 * truth.propose_draft_s);
  for (const StepTiming& t : steps)
    EXPECT_NEAR(fitted.uniform_step_seconds(t.batch, t.rows_per_sequence, t.context), t.seconds, 1e-3 * t.seconds);
  // Between knots the row share is interpolated, past the last one extrapolated along it.
  EXPECT_NEAR(fitted.row_seconds(96), (6 + 0.03 * 72) * kMs, 1e-3 * kMs);
  EXPECT_NEAR(fitted.row_seconds(512), (6 + 0.03 * 488) * kMs, 1e-2 * kMs);
}

TEST(StepCostModel, FitKeepsTermsNonNegativeAndRowTimesRising) {
  // Noisy timings that alone would give a negative per-position term and a dip in w.
  const std::vector<StepTiming> steps = {{1, 1, 256, 6.0 * kMs},  {1, 1, 4096, 5.9 * kMs}, {4, 1, 256, 6.2 * kMs},
                                         {1, 4, 256, 6.1 * kMs},  {2, 2, 256, 6.0 * kMs},  {8, 1, 256, 5.8 * kMs},
                                         {1, 16, 256, 9.0 * kMs}, {4, 4, 256, 8.8 * kMs}};
  const StepCosts c = fit_step_costs(steps, {});
  EXPECT_GE(c.context_s, 0);
  EXPECT_GE(c.sequence_s, 0);
  for (size_t i = 1; i < c.row_seconds.size(); ++i) EXPECT_GE(c.row_seconds[i], c.row_seconds[i - 1]);
  EXPECT_EQ(c.propose_s, 0);
  EXPECT_THROW(fit_step_costs({}, {}), Error);
}

}  // namespace
}  // namespace specserve::engine
