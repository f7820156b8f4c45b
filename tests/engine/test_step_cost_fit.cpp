// The step cost model's fit (engine/step_cost_model.h, fit_step_costs): it recovers the coefficients of
// its own form, the per-draft propose term and the plain curve included, and keeps its terms non-negative
// and the row share rising on noisy timings; the plain curve prices plain steps apart from verify steps of
// as many rows, and the draft-length search follows it.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "engine/draft_length_search.h"
#include "engine/step_cost_model.h"
#include "milliseconds.h"

namespace specserve::engine {
namespace {

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
  ASSERT_FALSE(c.plain_knots.empty());
  for (size_t i = 1; i < c.plain_seconds.size(); ++i) EXPECT_GE(c.plain_seconds[i], c.plain_seconds[i - 1]);
  EXPECT_EQ(c.propose_s, 0);
  EXPECT_THROW(fit_step_costs({}, {}), Error);
}

// A hybrid-like table: a plain step of S sequences costs 0.8 of the verify form at S rows (its own
// kernels), which no choice of w and the per-sequence term could fit together with the verify steps.
StepCosts hybrid_truth() {
  StepCosts truth;
  truth.row_knots = {2, 4, 8, 16, 32, 64, 128, 256};
  for (double r : truth.row_knots) truth.row_seconds.push_back((15 + 0.05 * std::max(0.0, r - 16)) * kMs);
  truth.sequence_s = 0.12 * kMs;
  truth.context_s = 2e-5 * kMs;
  truth.row_context_s = 3e-6 * kMs;
  truth.propose_s = 0.5 * kMs;
  truth.propose_sequence_s = 0.03 * kMs;
  const StepCostModel verify(truth);
  for (double s : {1.0, 4.0, 16.0, 64.0}) {
    truth.plain_knots.push_back(s);
    truth.plain_seconds.push_back(0.8 * verify.verify_seconds(s, s, 0, 0));
  }
  return truth;
}

TEST(StepCostModel, FitGivesPlainStepsTheirOwnCurve) {
  const StepCosts truth = hybrid_truth();
  const StepCostModel model(truth);
  std::vector<StepTiming> steps;
  for (int context : {256, 4096})
    for (int b : {1, 4, 16, 64})
      for (int k : {1, 2, 4, 8, 16})
        if (context == 256 || b <= 4) steps.push_back({b, k, context, model.uniform_step_seconds(b, k, context)});
  const StepCostModel fitted(fit_step_costs(steps, {}));
  ASSERT_EQ(fitted.costs().plain_knots, (std::vector<double>{1, 4, 16, 64}));
  EXPECT_EQ(fitted.costs().row_knots.front(), 2);  // w's knots: the verify steps' rows only
  EXPECT_NEAR(fitted.costs().sequence_s, truth.sequence_s, 1e-3 * truth.sequence_s);
  EXPECT_NEAR(fitted.costs().context_s, truth.context_s, 1e-3 * truth.context_s);
  for (const StepTiming& t : steps)
    EXPECT_NEAR(fitted.uniform_step_seconds(t.batch, t.rows_per_sequence, t.context), t.seconds, 1e-3 * t.seconds)
        << t.batch << " x " << t.rows_per_sequence << " at " << t.context;
  // A plain step is priced by the plain curve (interpolated between batches), a step with drafts by the
  // verify form even at one draft.
  EXPECT_NEAR(fitted.plain_seconds(32, 0), model.plain_seconds(32, 0), 1e-3 * model.plain_seconds(32, 0));
  EXPECT_LT(fitted.step_seconds(64, 64, 0, 0), 0.85 * fitted.verify_seconds(64, 64, 0, 0));
  EXPECT_NEAR(fitted.step_seconds(65, 64, 0, 0), model.verify_seconds(65, 64, 0, 0),
              2e-3 * model.verify_seconds(65, 64, 0, 0));

  // With plain timings only (no drafts to verify), w carries them and there is no plain curve.
  std::vector<StepTiming> plain;
  for (const StepTiming& t : steps)
    if (t.plain()) plain.push_back(t);
  const StepCosts only = fit_step_costs(plain, {});
  EXPECT_TRUE(only.plain_knots.empty());
  EXPECT_EQ(only.row_knots, (std::vector<double>{1, 4, 16, 64}));
}

TEST(StepCostModel, TheSearchKeepsRowsPlainWhereThePlainCurveSaysDraftsDoNotPay) {
  // 64 sequences whose drafts are accepted at 0.3 each: under the verify form at 64 rows drafting pays on
  // this table, against the plain curve's cheaper plain step it does not.
  const StepCosts truth = hybrid_truth();
  StepCosts no_curve = truth;  // the same table priced by the verify form alone
  no_curve.plain_knots.clear();
  no_curve.plain_seconds.clear();
  std::vector<DraftCandidate> c(64);
  for (DraftCandidate& d : c) {
    d.max_drafts = 15;
    d.context = 512;
    d.accept.assign(15, 0.3);
  }
  auto drafts = [](const DraftChoice& choice) {
    int n = 0;
    for (int g : choice.gamma) n += g;
    return n;
  };
  const DraftChoice with = choose_draft_lengths(StepCostModel(truth), c);
  const DraftChoice without = choose_draft_lengths(StepCostModel(no_curve), c);
  EXPECT_EQ(drafts(with), 0);
  EXPECT_GT(drafts(without), 0);
  // Both agree with the search run without its bound.
  for (const StepCosts* k : {&truth, static_cast<const StepCosts*>(&no_curve)}) {
    DraftChoice unbounded;
    choose_draft_lengths(StepCostModel(*k), c, {}, unbounded, false);
    EXPECT_EQ(drafts(unbounded), drafts(k == &truth ? with : without));
  }
}

}  // namespace
}  // namespace specserve::engine
