// The draft-length policy (engine/draft_length_policy.h) on scripted step cost tables: it keeps γ at 0
// where verify rows cost more than the tokens they return, drafts long where acceptance is high and
// verify cheap, and matches an exhaustive search; the acceptance statistics it reads
// (engine/acceptance_stats.h). The cost model's fit: test_step_cost_fit.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>

#include "core/error.h"
#include "engine/acceptance_stats.h"
#include "engine/draft_length_policy.h"
#include "engine/step_cost_model.h"
#include "milliseconds.h"

namespace specserve::engine {
namespace {

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

// The measured correction: where the clock says a step with drafts costs more than the model says, a
// choice the model alone would draft for becomes plain rows; the correction follows the measurements.
TEST(DraftLengthPolicy, MeasuredStepCostsOverruleTheModel) {
  // Verify rows cost a fiftieth of a decode step each; at 0.5 acceptance γ = 1 gains a little on the model.
  const StepCostModel costs = table([](double r) { return 10.0 + 0.2 * r; }, 1.0);
  const std::vector<DraftCandidate> c(4, candidate(15, 0.5));
  const DraftChoice model_only = choose_draft_lengths(costs, c);
  ASSERT_GT(model_only.gamma[0], 0);
  EngineMetrics metrics;
  EngineOptions options;
  options.draft_policy = DraftPolicy::Adaptive;
  options.step_costs = costs.costs();
  DraftLengthPolicy policy(options, metrics);
  for (int i = 0; i < 40; ++i) {
    policy.observe_step(true, 0.010, 0.020);   // steps with drafts take twice the prediction
    policy.observe_step(false, 0.010, 0.011);  // plain ones 10 % more
  }
  EXPECT_NEAR(policy.correction().drafting, 2.0, 0.05);
  EXPECT_NEAR(policy.correction().plain, 1.1, 0.01);
  for (int g : choose_draft_lengths(costs, c, policy.correction()).gamma) EXPECT_EQ(g, 0);
  // Nonsense measurements leave it alone; a wild one moves it by at most a tenth of 4x.
  policy.observe_step(true, 0, 1);
  policy.observe_step(true, 0.01, -1);
  EXPECT_NEAR(policy.correction().drafting, 2.0, 0.05);
  policy.observe_step(true, 0.001, 100);
  EXPECT_LE(policy.correction().drafting, 2.0 + 0.1 * 4);
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
  EXPECT_FALSE(DraftLengthPolicy::probes(n, -1, 0));  // never seen: the prior stands
  EXPECT_TRUE(DraftLengthPolicy::probes(2 * n, n, 3));
  EXPECT_TRUE(DraftLengthPolicy::probes(2 * n, n + 1, 3));  // the last probe's verify, chosen at n
  EXPECT_FALSE(DraftLengthPolicy::probes(2 * n, n + 2, 3));
  EXPECT_FALSE(DraftLengthPolicy::probes(2 * n + 1, 0, 3));
  // The back-off: 4 steps after the stopping verify, then 8, 16, and 32 from then on.
  EXPECT_EQ(DraftLengthPolicy::probe_interval(0), DraftLengthPolicy::kFirstProbeInterval);
  EXPECT_EQ(DraftLengthPolicy::probe_interval(1), 2 * DraftLengthPolicy::kFirstProbeInterval);
  EXPECT_EQ(DraftLengthPolicy::probe_interval(30), n);
  EXPECT_TRUE(DraftLengthPolicy::probes(8, 4, 0));
  EXPECT_FALSE(DraftLengthPolicy::probes(8, 6, 0));
  EXPECT_FALSE(DraftLengthPolicy::probes(12, 4, 1));  // not a multiple of 8
  EXPECT_TRUE(DraftLengthPolicy::probes(16, 4, 1));
}

TEST(DraftLengthPolicy, BacksOffProbesThatFindNothingAndResetsOnDrafting) {
  AcceptanceStats s;
  s.observe(3, 0, 0);
  DraftCandidate c;
  c.max_drafts = 15;
  EXPECT_FALSE(DraftLengthPolicy::schedule_probe(3, s, c));
  EXPECT_EQ(c.min_drafts, 0);
  DraftLengthPolicy::after_choice(s, c, 0);  // a plain row by choice: no change
  EXPECT_EQ(s.quiet_probes(), 0);
  ASSERT_TRUE(DraftLengthPolicy::schedule_probe(4, s, c));
  EXPECT_EQ(c.min_drafts, DraftLengthPolicy::kProbeDrafts);
  DraftLengthPolicy::after_choice(s, c, DraftLengthPolicy::kProbeDrafts);  // only the probe's drafts
  EXPECT_EQ(s.quiet_probes(), 1);
  for (int i = 0; i < 10; ++i) DraftLengthPolicy::after_choice(s, c, DraftLengthPolicy::kProbeDrafts);
  EXPECT_EQ(DraftLengthPolicy::probe_interval(s.quiet_probes()), DraftLengthPolicy::kProbeInterval);
  DraftLengthPolicy::after_choice(s, c, 6);  // the policy wants more than the probe: drafting by choice
  EXPECT_EQ(s.quiet_probes(), 0);
  // A sequence that cannot draft never probes.
  c.max_drafts = 0;
  EXPECT_FALSE(DraftLengthPolicy::schedule_probe(64, s, c));
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
      return tokens / (costs.step_seconds(rows, double(c.size()), ctx, extra) +
                       costs.propose_seconds(drafted, drafted_ctx, rows - double(c.size())));
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
  AcceptanceStats engine_wide(AcceptanceStats::kEngineDecay, AcceptanceStats::kPriorWeight);
  AcceptanceStats s;
  EXPECT_DOUBLE_EQ(s.rate(1), AcceptanceStats::kDefaultPrior);
  EXPECT_DOUBLE_EQ(s.rate(3, &engine_wide), AcceptanceStats::kDefaultPrior);
  // Accepts the first draft, rejects the second, every time. The smoothing weighs about
  // 1 / (1 - decay) = 5 recent verifies against the prior's 2; position 1's prior is the default, position
  // 2's is position 1's rate, and position 3, never tried, inherits position 2's.
  for (int i = 0; i < 30; ++i) s.observe(4, 1);
  const double a1 = (5 + 2 * AcceptanceStats::kDefaultPrior) / 7;
  EXPECT_NEAR(s.rate(1), a1, 1e-3);
  EXPECT_NEAR(s.rate(2), 2 * a1 / 7, 1e-3);
  EXPECT_NEAR(s.rate(3), s.rate(2), 1e-12);
  EXPECT_NEAR(s.rate(20), s.rate(2), 1e-12);
  EXPECT_EQ(s.verifies(), 30);
  // Its own evidence outweighs the engine-wide rates: the engine accepting everything lifts position 1
  // but not the positions past the sequence's own failure at 2.
  for (int i = 0; i < 30; ++i) engine_wide.observe(8, 8);
  EXPECT_GT(s.rate(1, &engine_wide), s.rate(1));
  EXPECT_LT(s.rate(3, &engine_wide), 0.35);
  // A change of acceptance shows within a few verifies (smoothing, not a lifetime average).
  for (int i = 0; i < 10; ++i) s.observe(4, 0);
  EXPECT_LT(s.rate(1), 0.3);
}

TEST(AcceptanceStats, ANewSequenceReadsTheEngineWideProfile) {
  // The engine has seen drafts 1..4 accepted and 5 rejected, over and over.
  AcceptanceStats engine_wide(AcceptanceStats::kEngineDecay, AcceptanceStats::kPriorWeight);
  for (int i = 0; i < 200; ++i) engine_wide.observe(8, 4);
  const AcceptanceStats s;
  for (int j = 1; j <= 10; ++j) EXPECT_NEAR(s.rate(j, &engine_wide), engine_wide.rate(j), 0.01) << j;
  EXPECT_GT(engine_wide.rate(4), 0.95);
  EXPECT_LT(engine_wide.rate(5), 0.05);
  EXPECT_LT(engine_wide.rate(8), 0.05);  // untried: inherits position 5's
}

TEST(AcceptanceStats, AFullyAcceptedVerifyRaisesThePositionsBeyondIt) {
  AcceptanceStats s;
  const double before = s.rate(12);
  s.observe(3, 3);
  // Positions 4.. were not tried; they inherit position 3's rate, now above the prior.
  EXPECT_GT(s.rate(12), before + 0.2);
  EXPECT_NEAR(s.rate(12), s.rate(3), 1e-12);
  s.observe(6, 6);
  EXPECT_GT(s.rate(12), 0.9);
  // One failure at position 2 lowers it and everything past it.
  std::vector<double> before_failure(12), after_failure(12);
  s.rates(before_failure);
  s.observe(6, 1);
  s.rates(after_failure);
  EXPECT_LT(after_failure[1], 0.7);
  for (size_t j = 1; j < 12; ++j) EXPECT_LT(after_failure[j], before_failure[j] - 0.02) << j + 1;
}

TEST(AcceptanceStats, TheEngineWideShapeLowersDeepPositionsNeverRaisesThem) {
  // The engine sees acceptance fall from position 5 on (drafts 1..4 accepted, 5 rejected, half the time;
  // all 8 the other half).
  AcceptanceStats engine_wide(AcceptanceStats::kEngineDecay, AcceptanceStats::kPriorWeight);
  for (int i = 0; i < 100; ++i) engine_wide.observe(8, i % 2 ? 4 : 8);
  // A sequence that has only drafted 3, all accepted: position 5 is read lower than position 4.
  AcceptanceStats s;
  for (int i = 0; i < 3; ++i) s.observe(3, 3);
  EXPECT_LT(s.rate(5, &engine_wide), 0.7 * s.rate(4, &engine_wide));
  // A sequence that rejects at 2 is not lifted at 3.. by the engine's higher rates there.
  AcceptanceStats t;
  for (int i = 0; i < 5; ++i) t.observe(3, 1);
  EXPECT_LE(t.rate(3, &engine_wide), t.rate(2, &engine_wide) + 1e-12);
}

TEST(AcceptanceStats, OldEvidenceFadesTowardsTheChain) {
  // A failure at position 6 seen once, then only verifies of 2 drafts, all accepted: position 6's counts
  // age with every verify, so it comes back to what position 2 says.
  AcceptanceStats s;
  s.observe(8, 5);
  EXPECT_LT(s.rate(6), s.rate(5) - 0.25);
  for (int i = 0; i < 20; ++i) s.observe(2, 2);
  EXPECT_GT(s.rate(6), 0.9);
  EXPECT_NEAR(s.rate(6), s.rate(2), 0.02);
}

// The policy in the engine's loop (engine/step.cpp, Engine::draft_lengths): each step every sequence's
// γ from its acceptance statistics against the engine-wide ones, probes on their schedule, then each
// verify's outcome observed by both. `accepted(i, drafts)` says how many of sequence i's drafts a verify
// accepts. Returns each step's γ per sequence.
std::vector<std::vector<int>> simulate(const StepCostModel& costs, int sequences, int gamma_max, int steps,
                                       const std::function<int(int, int)>& accepted) {
  std::vector<AcceptanceStats> seq(static_cast<size_t>(sequences));
  EngineMetrics metrics;
  EngineOptions options;
  options.draft_policy = DraftPolicy::Adaptive;
  options.step_costs = costs.costs();
  DraftLengthPolicy policy(options, metrics);  // the probe budget's credit
  AcceptanceStats& engine_wide = policy.engine_acceptance();
  std::vector<std::vector<int>> out;
  for (int64_t step = 0; step < steps; ++step) {
    // The verifies of the step (their drafts chosen at the end of the one before), then the next γ.
    if (!out.empty()) {
      for (size_t i = 0; i < seq.size(); ++i) {
        const int g = out.back()[i];
        if (g == 0) continue;
        const int a = std::clamp(accepted(static_cast<int>(i), g), 0, g);
        seq[i].observe(g, a, step);
        engine_wide.observe(g, a);
      }
    }
    std::vector<double> prior(static_cast<size_t>(gamma_max));
    engine_wide.rates(prior);
    std::vector<DraftCandidate> c(static_cast<size_t>(sequences));
    std::vector<const AcceptanceStats*> stats;
    for (size_t i = 0; i < c.size(); ++i) {
      c[i].max_drafts = gamma_max;
      c[i].context = 512;
      seq[i].mark_first_step(step);
      stats.push_back(&seq[i]);
      c[i].accept.resize(static_cast<size_t>(gamma_max));
      seq[i].rates(c[i].accept, prior, step);
    }
    DraftLengthPolicy::schedule_probes(step, stats, c);
    policy.afford_probes(c);
    out.push_back(choose_draft_lengths(costs, c).gamma);
    for (size_t i = 0; i < c.size(); ++i) DraftLengthPolicy::after_choice(seq[i], c[i], out.back()[i]);
  }
  return out;
}

// H200 qwen3-8b-like step costs (docs/BENCHMARKS.md): up to 16 rows cost about a decode step (4.9 ms),
// then about 0.11 ms a row; a propose 1.25 ms + 0.06 ms a sequence.
StepCostModel gpu_like_costs() {
  StepCosts c;
  c.row_knots = {1, 16, 64, 256, 1024};
  for (double ms : {4.9, 5.6, 11.0, 35.0, 130.0}) c.row_seconds.push_back(ms * kMs);
  c.sequence_s = 0.1 * kMs;
  c.context_s = 4.6e-5 * kMs;
  c.propose_s = 1.25 * kMs;
  c.propose_sequence_s = 0.06 * kMs;
  return StepCostModel(c);
}

std::string trace(const std::vector<std::vector<int>>& steps, size_t n = 12) {
  std::string s;
  for (size_t t = 0; t < std::min(n, steps.size()); ++t) {
    s += "[";
    for (int g : steps[t]) s += std::to_string(g) + " ";
    s += "] ";
  }
  return s;
}

TEST(DraftLengthPolicy, AllCorrectDraftsReachTheMostDraftsWithinTwoVerifies) {
  for (int n : {1, 4, 8}) {
    const auto steps = simulate(gpu_like_costs(), n, 15, 12, [](int, int drafts) { return drafts; });
    // Each sequence drafts from its first step (the prior is worth drafting for) and is at 15 from its
    // third verify on.
    for (size_t t = 0; t < steps.size(); ++t)
      for (int g : steps[t]) {
        EXPECT_GT(g, 0) << n << " sequences: " << trace(steps);
        if (t >= 2) EXPECT_EQ(g, 15) << n << " sequences, step " << t << ": " << trace(steps);
      }
  }
}

TEST(DraftLengthPolicy, EveryDraftWrongFallsToPlainRowsAndProbes) {
  constexpr int64_t kLongest = DraftLengthPolicy::kProbeInterval;
  for (int n : {1, 4, 16}) {
    const int total = 2048;
    const auto steps = simulate(gpu_like_costs(), n, 15, total, [](int, int) { return 0; });
    std::vector<int> early(static_cast<size_t>(n));  // verifies in a row from the first step
    std::vector<std::vector<int>> probes(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      int t = 0;
      while (t < total && steps[static_cast<size_t>(t)][static_cast<size_t>(i)] > 0) ++t;
      early[static_cast<size_t>(i)] = t;
      // A few verifies on the prior (and on the engine-wide rates while they still hope).
      EXPECT_LE(t, 4) << n << " sequences: " << trace(steps, 40);
      for (; t < total; ++t)
        if (steps[static_cast<size_t>(t)][static_cast<size_t>(i)] > 0) probes[static_cast<size_t>(i)].push_back(t);
    }
    for (int t = 8; t < total; ++t) {  // then plain rows and probes of kProbeDrafts, a few sequences a step
      int probing = 0;
      for (int g : steps[static_cast<size_t>(t)]) {
        EXPECT_LE(g, DraftLengthPolicy::kProbeDrafts) << n << " sequences, step " << t;
        probing += g > 0;
      }
      EXPECT_LE(probing, DraftLengthPolicy::kMaxProbesPerStep) << n << " sequences, step " << t;
    }
    // Each sequence keeps probing, as often as the back-off (at most kProbeInterval apart once backed off)
    // and the probe budget allow (a step of `p` probes waits for `wait` steps of kProbeBudget's credit),
    // times the turns it waits for when more than kMaxProbesPerStep are due together. The first probe
    // step is free: the first probes come on the back-off's first intervals.
    const int64_t turns = (n + DraftLengthPolicy::kMaxProbesPerStep - 1) / DraftLengthPolicy::kMaxProbesPerStep;
    const int p = std::min(n, DraftLengthPolicy::kMaxProbesPerStep);
    const StepCostModel costs = gpu_like_costs();
    const double plain = costs.step_seconds(n, n, n * 512.0, 0);
    const double wait = (costs.step_seconds(n + 3 * p, n, n * 512.0, 3 * p * 512.0) +
                         costs.propose_seconds(p, p * 512.0, 3 * p) - plain) /
                        (DraftLengthPolicy::kProbeBudget * plain);
    const auto longest_gap = static_cast<int64_t>(turns * (kLongest + wait) + kLongest / 2);
    for (int i = 0; i < n; ++i) {
      const auto& at = probes[static_cast<size_t>(i)];
      ASSERT_GE(at.size(), 2u) << n << " sequences, sequence " << i;
      if (i < p) EXPECT_LE(at.front() - early[static_cast<size_t>(i)], 2 * DraftLengthPolicy::kFirstProbeInterval) << n;
      for (size_t k = 1; k < at.size(); ++k)  // (+ half: a probe on a multiple of 16 waits for a multiple of 32)
        EXPECT_LE(at[k] - at[k - 1], longest_gap) << n << ", step " << at[k];
      EXPECT_LE(static_cast<int64_t>(at.size()), total / kLongest + 4) << n;
      if (n <= DraftLengthPolicy::kMaxProbesPerStep) {  // gaps never shrink until kProbeInterval
        for (size_t k = 2; k < at.size(); ++k)
          EXPECT_GE(at[k] - at[k - 1], std::min<int64_t>(at[k - 1] - at[k - 2], kLongest)) << n << ", step " << at[k];
        EXPECT_GE(at.back() - at[at.size() - 2], kLongest) << n;
      }
    }
  }
}

// The probe budget: over many steps probes cost about kProbeBudget of the plain steps' predicted time (plus
// the policy's first probe step, which is free); unaffordable probes are cleared.
TEST(DraftLengthPolicy, ProbesStayWithinTheirBudget) {
  const StepCostModel costs = gpu_like_costs();
  EngineMetrics metrics;
  EngineOptions options;
  options.draft_policy = DraftPolicy::Adaptive;
  options.step_costs = costs.costs();
  DraftLengthPolicy policy(options, metrics);
  const int n = 64, probing = 4, steps = 400;
  const double plain = costs.step_seconds(n, n, n * 512.0, 0);
  const double cost = costs.step_seconds(n + 3 * probing, n, n * 512.0, 3 * probing * 512.0) +
                      costs.propose_seconds(probing, probing * 512.0, 3 * probing) - plain;
  int afforded = 0;
  for (int t = 0; t < steps; ++t) {
    std::vector<DraftCandidate> c(n, candidate(15, 0.05));
    for (int i = 0; i < probing; ++i) c[static_cast<size_t>(i)].min_drafts = 3;
    const int got = policy.afford_probes(c);
    ASSERT_TRUE(got == 0 || got == probing);
    for (const DraftCandidate& d : c) EXPECT_EQ(d.min_drafts, got ? (&d - c.data() < probing ? 3 : 0) : 0);
    afforded += got > 0;
  }
  const double expected = 1 + DraftLengthPolicy::kProbeBudget * steps * plain / cost;
  std::printf("%d of %d steps probed (budget: %.1f)\n", afforded, steps, expected);
  EXPECT_LE(afforded, expected + 1);
  EXPECT_GE(afforded, expected - 2);
  // Nothing due: nothing spent, and the credit never passes one plain step (or the probe it could not
  // cover).
  std::vector<DraftCandidate> none(n, candidate(15, 0.05));
  for (int t = 0; t < 200; ++t) EXPECT_EQ(policy.afford_probes(none), 0);
  EXPECT_LE(policy.probe_credit(), std::max(plain, cost) * (1 + 1e-9));
}

// A probe step dearer than a plain step (one sequence whose propose costs three decode steps: a small
// model on a CPU) is still afforded within the budget: the credit is kept up to that probe's cost.
TEST(DraftLengthPolicy, ProbesDearerThanAPlainStepAreStillAfforded) {
  const StepCostModel costs = table([](double r) { return 10.0 + 0.5 * r; }, 30.0);
  EngineMetrics metrics;
  EngineOptions options;
  options.draft_policy = DraftPolicy::Adaptive;
  options.step_costs = costs.costs();
  DraftLengthPolicy policy(options, metrics);
  const int steps = 40000;
  int afforded = 0;
  for (int t = 0; t < steps; ++t) {
    std::vector<DraftCandidate> c(1, candidate(15, 0.05));
    c[0].min_drafts = 3;
    afforded += policy.afford_probes(c) > 0;
  }
  const double plain = costs.step_seconds(1, 1, 512.0, 0);
  const double cost = costs.step_seconds(4, 1, 512.0, 3 * 512.0) + costs.propose_seconds(1, 512.0, 3) - plain;
  ASSERT_GT(cost, 2 * plain);
  const double expected = 1 + DraftLengthPolicy::kProbeBudget * steps * plain / cost;
  EXPECT_GE(afforded, expected - 2) << "budget " << expected;
  EXPECT_LE(afforded, expected + 1) << "budget " << expected;
}

// The budget's share: kProbeBudget while every first draft engine-wide was wrong, kHopefulProbeBudget
// once a quarter of them are accepted, in proportion between (a load whose drafts are almost always wrong
// stays near kProbeBudget).
TEST(DraftLengthPolicy, ProbeBudgetFollowsTheFirstDraftsAcceptance) {
  EngineMetrics metrics;
  EngineOptions options;
  options.draft_policy = DraftPolicy::Adaptive;
  options.step_costs = gpu_like_costs().costs();
  DraftLengthPolicy policy(options, metrics);
  AcceptanceStats& e = policy.engine_acceptance();
  EXPECT_EQ(policy.probe_budget(), DraftLengthPolicy::kProbeBudget);  // nothing seen: not hopeful
  for (int i = 0; i < 50; ++i) e.observe(3, 0);
  EXPECT_EQ(policy.probe_budget(), DraftLengthPolicy::kProbeBudget);
  e.observe(3, 2);  // one accepted in ~40 (decayed): a fortieth of the way to a quarter
  const double rate = e.accepted_at(1) / e.trials_at(1);
  EXPECT_GT(rate, 0.02);
  EXPECT_LT(rate, 0.04);
  EXPECT_NEAR(
      policy.probe_budget(),
      DraftLengthPolicy::kProbeBudget + (DraftLengthPolicy::kHopefulProbeBudget - DraftLengthPolicy::kProbeBudget) *
                                            rate / DraftLengthPolicy::kHopefulAcceptance,
      1e-12);
  for (int i = 0; i < 100; ++i) e.observe(3, i % 2 == 0 ? 1 : 0);  // half accepted
  EXPECT_EQ(policy.probe_budget(), DraftLengthPolicy::kHopefulProbeBudget);
}

TEST(DraftLengthPolicy, OneUnluckyVerifyCostsOnlyAFewPlainSteps) {
  // Every sequence's first verify rejects everything (it stops them all: the engine-wide rates fall too);
  // afterwards drafts are right at 0.9. The back-off's first probes (the free probe step) find that
  // within a few steps, and the engine-wide rates bring back the sequences that did not probe. With more
  // sequences than one probe step holds, those wait for the rates to outweigh their own rejected verify
  // as it ages (a propose for the four that probed costs more than their drafts return at 16 sequences),
  // or for the budget's next probe step: a few tens of steps.
  for (int n : {1, 4, 16}) {
    std::vector<int> verifies(static_cast<size_t>(n));
    std::mt19937 rng(7);
    std::bernoulli_distribution correct(0.9);
    const auto steps = simulate(gpu_like_costs(), n, 15, 60, [&](int i, int drafts) {
      if (verifies[static_cast<size_t>(i)]++ == 0) return 0;
      int a = 0;
      while (a < drafts && correct(rng)) ++a;
      return a;
    });
    size_t back = 1;  // the first step after the stop where every sequence drafts again
    while (back < steps.size() && std::any_of(steps[back].begin(), steps[back].end(), [](int g) { return g == 0; }))
      ++back;
    std::printf("%d sequences: every one drafting again from step %zu\n", n, back);
    const int64_t bound = (n <= DraftLengthPolicy::kMaxProbesPerStep ? 4 : 12) * DraftLengthPolicy::kFirstProbeInterval;
    EXPECT_LE(back, static_cast<size_t>(bound)) << n << " sequences: " << trace(steps, 20);
  }
}

TEST(DraftLengthPolicy, GeometricAcceptanceSettlesNearTheCostOptimalLength) {
  for (double p : {0.6, 0.8, 0.9}) {
    for (int n : {1, 4, 16}) {
      const StepCostModel costs = gpu_like_costs();
      // The best choice knowing the true rate: every sequence at p at every position.
      const std::vector<DraftCandidate> truth(static_cast<size_t>(n), candidate(15, p));
      const DraftChoice best = choose_draft_lengths(costs, truth);
      std::mt19937 rng(static_cast<uint32_t>(n * 100 + p * 10));
      std::bernoulli_distribution correct(p);
      const int total = 300;
      const auto steps = simulate(costs, n, 15, total, [&](int, int drafts) {
        int a = 0;
        while (a < drafts && correct(rng)) ++a;
        return a;
      });
      // Over the second half: the mean γ and the true expected tokens per second of what was chosen.
      double gamma_sum = 0, rate_sum = 0;
      int counted = 0;
      for (int t = total / 2; t < total; ++t) {
        std::vector<DraftCandidate> chosen = truth;
        for (int g : steps[static_cast<size_t>(t)]) gamma_sum += g;
        double tokens = 0, rows = 0, drafted = 0;
        for (int g : steps[static_cast<size_t>(t)]) {
          tokens += (1 - std::pow(p, g + 1)) / (1 - p);
          rows += 1 + g;
          drafted += g > 0;
        }
        rate_sum += tokens / (costs.step_seconds(rows, n, n * 512.0, (rows - n) * 512.0) +
                              costs.propose_seconds(drafted, drafted * 512, rows - n));
        ++counted;
      }
      double best_gamma = 0;
      for (int g : best.gamma) best_gamma += g;
      best_gamma /= n;
      const double mean_gamma = gamma_sum / counted / n;
      const double best_rate = best.tokens / best.seconds;
      std::printf("p %.1f, %d sequences: cost-optimal γ %.1f (%.0f tok/s), adaptive mean γ %.1f (%.0f tok/s)\n", p, n,
                  best_gamma, best_rate, mean_gamma, rate_sum / counted);
      EXPECT_NEAR(mean_gamma, best_gamma, std::max(2.0, 0.3 * best_gamma)) << "p " << p << ", " << n;
      EXPECT_GE(rate_sum / counted, 0.95 * best_rate) << "p " << p << ", " << n;
    }
  }
}

}  // namespace
}  // namespace specserve::engine
