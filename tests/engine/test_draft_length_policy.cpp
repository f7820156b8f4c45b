// The draft-length policy (engine/draft_length_policy.h) on scripted step cost tables: it keeps γ at 0
// where verify rows cost more than the tokens they return, drafts long where acceptance is high and
// verify cheap, and matches an exhaustive search; the acceptance statistics it reads
// (engine/acceptance_stats.h) and the cost model's fit (engine/step_cost_model.h).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "core/error.h"
#include "engine/acceptance_stats.h"
#include "engine/draft_length_policy.h"
#include "engine/step_cost_model.h"

namespace specserve::engine {
namespace {

constexpr double kMs = 1e-3;

// A step whose rows' share is `row_ms(R)` at R = 1, 2, 4, ..., 1024 and whose other terms are given.
StepCostModel table(const std::function<double(double)>& row_ms, double propose_ms, double propose_seq_ms = 0) {
  StepCosts c;
  for (double r = 1; r <= 1024; r *= 2) {
    c.row_knots.push_back(r);
    c.row_seconds.push_back(row_ms(r) * kMs);
  }
  c.propose_s = propose_ms * kMs;
  c.propose_sequence_s = propose_seq_ms * kMs;
  return StepCostModel(c);
}

DraftCandidate candidate(int max_drafts, double accept, int64_t context = 512) {
  DraftCandidate c;
  c.max_drafts = max_drafts;
  c.context = context;
  c.accept.assign(static_cast<size_t>(max_drafts), accept);
  return c;
}

TEST(DraftLengthPolicy, PicksZeroWhenVerifyRowsCostMoreThanTheyReturn) {
  // Every row costs as much as a decode row (compute-bound): a draft accepted half the time returns half
  // a token for a whole row's time.
  const StepCostModel costs = table([](double r) { return 1.0 * r; }, 0.2);
  const std::vector<DraftCandidate> c(8, candidate(15, 0.5));
  const DraftChoice choice = choose_draft_lengths(costs, c);
  for (int g : choice.gamma) EXPECT_EQ(g, 0);
  EXPECT_DOUBLE_EQ(choice.tokens, 8.0);
  // And nothing to propose: the predicted time is the plain decode step's alone.
  EXPECT_NEAR(choice.seconds, costs.step_seconds(8, 8, 8 * 512.0, 0), 1e-12);
}

TEST(DraftLengthPolicy, PicksZeroWhenTheProposeCostsMoreThanTheDraftsReturn) {
  // Free verify rows, but a propose as long as 20 decode steps: even perfect drafts of 15 tokens lose.
  const StepCostModel costs = table([](double) { return 10.0; }, 200.0);
  const std::vector<DraftCandidate> c(1, candidate(15, 0.3));
  EXPECT_EQ(choose_draft_lengths(costs, c).gamma, std::vector<int>{0});
}

TEST(DraftLengthPolicy, PicksTheLongestDraftsWhenAcceptanceIsHighAndVerifyCheap) {
  // Memory-bound: 1 to 1,024 rows cost the same; the propose is a tenth of a decode step.
  const StepCostModel costs = table([](double r) { return 10.0 + 0.001 * r; }, 1.0);
  const std::vector<DraftCandidate> c(4, candidate(15, 0.95));
  for (int g : choose_draft_lengths(costs, c).gamma) EXPECT_EQ(g, 15);
}

TEST(DraftLengthPolicy, DraftsLongerWhereAcceptanceIsHigher) {
  // Rows cost a tenth of a decode step each past 16 rows: a mixed batch.
  const StepCostModel costs = table([](double r) { return 10.0 + 0.5 * std::max(0.0, r - 16); }, 1.0);
  const std::vector<DraftCandidate> c = {candidate(15, 0.9), candidate(15, 0.6), candidate(15, 0.02),
                                         candidate(0, 0.0)};
  const DraftChoice choice = choose_draft_lengths(costs, c);
  EXPECT_GT(choice.gamma[0], choice.gamma[1]);
  EXPECT_GT(choice.gamma[1], 0);
  EXPECT_EQ(choice.gamma[2], 0);  // accepts almost nothing
  EXPECT_EQ(choice.gamma[3], 0);  // cannot draft
}

TEST(DraftLengthPolicy, KeepsAProbesDrafts) {
  const StepCostModel costs = table([](double r) { return 1.0 * r; }, 0.2);
  std::vector<DraftCandidate> c(3, candidate(15, 0.1));
  c[1].min_drafts = 3;
  EXPECT_EQ(choose_draft_lengths(costs, c).gamma, (std::vector<int>{0, 3, 0}));
}

TEST(DraftLengthPolicy, ProbesOnTheIntervalAfterAQuietSpell) {
  const int64_t n = DraftLengthPolicy::kProbeInterval;
  EXPECT_FALSE(DraftLengthPolicy::probes(n, -1));  // never seen: the prior stands
  EXPECT_TRUE(DraftLengthPolicy::probes(2 * n, n));
  EXPECT_FALSE(DraftLengthPolicy::probes(2 * n, n + 1));
  EXPECT_FALSE(DraftLengthPolicy::probes(2 * n + 1, 0));
}

// The search is a heuristic: on random small cases (random knees, propose costs and per-position
// acceptance, harder than real ones) its choice scores within 3 % of the best of every assignment, and
// within 0.2 % on average.
TEST(DraftLengthPolicy, MatchesAnExhaustiveSearch) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(0, 1);
  double ratio_sum = 0;
  const int trials = 200;
  for (int trial = 0; trial < trials; ++trial) {
    const double base = 5 + 10 * u(rng), slope = u(rng), knee = 1 + 16 * u(rng);
    StepCosts sc;
    for (double r = 1; r <= 64; r *= 2) {
      sc.row_knots.push_back(r);
      sc.row_seconds.push_back((base + slope * std::max(0.0, r - knee)) * kMs);
    }
    sc.sequence_s = 0.1 * u(rng) * kMs;
    sc.context_s = 1e-4 * u(rng) * kMs;
    sc.row_context_s = 1e-4 * u(rng) * kMs;
    sc.propose_s = 3 * u(rng) * kMs;
    sc.propose_sequence_s = u(rng) * kMs;
    const StepCostModel costs(sc);
    std::vector<DraftCandidate> c(3);
    for (auto& d : c) {
      d.max_drafts = 4;
      d.context = static_cast<int64_t>(4096 * u(rng));
      for (int j = 0; j < 4; ++j) d.accept.push_back(u(rng));
    }
    auto score = [&](const std::vector<int>& g) {
      double tokens = 0, rows = 0, ctx = 0, extra = 0, drafted = 0, drafted_ctx = 0;
      for (size_t i = 0; i < c.size(); ++i) {
        double run = 1;
        tokens += 1;
        for (int j = 0; j < g[i]; ++j) tokens += (run *= c[i].accept[static_cast<size_t>(j)]);
        rows += 1 + g[i];
        ctx += double(c[i].context);
        extra += g[i] * double(c[i].context);
        if (g[i] > 0) drafted += 1, drafted_ctx += double(c[i].context);
      }
      return tokens /
             (costs.step_seconds(rows, double(c.size()), ctx, extra) + costs.propose_seconds(drafted, drafted_ctx));
    };
    double best = 0;
    for (int a = 0; a <= 4; ++a)
      for (int b = 0; b <= 4; ++b)
        for (int d = 0; d <= 4; ++d) best = std::max(best, score({a, b, d}));
    const DraftChoice choice = choose_draft_lengths(costs, c);
    EXPECT_GE(score(choice.gamma), best * 0.97) << "trial " << trial;
    ratio_sum += score(choice.gamma) / best;
    EXPECT_NEAR(choice.tokens / choice.seconds, score(choice.gamma), 1e-9 * score(choice.gamma));
  }
  EXPECT_GE(ratio_sum / trials, 0.998);
}

TEST(AcceptanceStats, StartsAtThePriorAndLearnsPerPosition) {
  AcceptanceStats engine_wide(0.99, 2.0);
  AcceptanceStats s;
  EXPECT_DOUBLE_EQ(s.rate(1), AcceptanceStats::kDefaultPrior);
  EXPECT_DOUBLE_EQ(s.rate(3, &engine_wide), AcceptanceStats::kDefaultPrior);
  // Accepts the first draft, rejects the second, every time: positions past 2 are never seen. The
  // smoothing weighs about 1 / (1 - decay) = 5 recent verifies against the prior's 2.
  for (int i = 0; i < 30; ++i) s.observe(4, 1);
  EXPECT_NEAR(s.rate(1), (5 + 2 * AcceptanceStats::kDefaultPrior) / 7, 1e-3);
  EXPECT_NEAR(s.rate(2), (0 + 2 * AcceptanceStats::kDefaultPrior) / 7, 1e-3);
  EXPECT_DOUBLE_EQ(s.rate(3), AcceptanceStats::kDefaultPrior);
  EXPECT_EQ(s.verifies(), 30);
  // The prior is whatever the engine-wide statistics say.
  for (int i = 0; i < 30; ++i) engine_wide.observe(8, 8);
  EXPECT_GT(s.rate(3, &engine_wide), 0.9);
  // A change of acceptance shows within a few verifies (smoothing, not a lifetime average).
  for (int i = 0; i < 10; ++i) s.observe(4, 0);
  EXPECT_LT(s.rate(1), 0.3);
}

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
  const StepCostModel model(truth);
  std::vector<StepTiming> steps;
  std::vector<ProposeTiming> proposes;
  for (int context : {256, 4096})
    for (int b : {1, 4, 16})
      for (int k : {1, 2, 4, 8, 16}) steps.push_back({b, k, context, model.uniform_step_seconds(b, k, context)});
  for (int context : {256, 4096})
    for (int b : {1, 4, 16}) proposes.push_back({b, context, model.propose_seconds(b, double(b) * context)});
  const StepCostModel fitted(fit_step_costs(steps, proposes));
  EXPECT_NEAR(fitted.costs().sequence_s, truth.sequence_s, 1e-3 * truth.sequence_s);
  EXPECT_NEAR(fitted.costs().context_s, truth.context_s, 1e-3 * truth.context_s);
  EXPECT_NEAR(fitted.costs().row_context_s, truth.row_context_s, 1e-3 * truth.row_context_s);
  EXPECT_NEAR(fitted.costs().propose_s, truth.propose_s, 1e-3 * truth.propose_s);
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
