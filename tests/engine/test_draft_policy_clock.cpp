// The draft-length policy (engine/draft_length_policy.h) against a scripted clock: its step cost
// corrections (the first plain timings, the cap on one long step) and its plain checks, which time a plain
// step while it drafts so that a model that overprices plain steps does not keep it drafting at a loss.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "engine/acceptance_stats.h"
#include "engine/draft_length_policy.h"
#include "engine/step_cost_model.h"
#include "milliseconds.h"

namespace specserve::engine {
namespace {

// The adaptive policy on a model that prices a step of R rows at 1 ms + 0.01 ms a row (a plain step of four
// sequences ~1 ms) and a propose at 0.3 ms.
EngineOptions adaptive_options() {
  StepCosts c;
  c.row_knots = {1, 1024};
  c.row_seconds = {1.01 * kMs, (1.0 + 0.01 * 1024) * kMs};
  c.propose_s = 0.3 * kMs;
  EngineOptions options;
  options.draft_policy = DraftPolicy::Adaptive;
  options.step_costs = c;
  return options;
}

// The engine's loop around choose_step on a scripted clock: each step's verifies (geometric acceptance
// `a` per draft position, seeded), the next choice, and the clock's time for it handed back as the
// engine does (observe_step with the choice's predicted seconds). The model prices a plain step of four
// sequences at 1 ms and a verify row at 0.01 ms more, a propose at 0.3 ms; the clock says a plain step
// takes `plain_ms` and a drafting step what the model says. Returns, per step, whether it drafted.
std::vector<bool> run_on_clock(double plain_ms, double a, int64_t steps, int64_t* first_check = nullptr) {
  EngineMetrics metrics;
  DraftLengthPolicy policy(adaptive_options(), metrics);
  std::vector<AcceptanceStats> stats(4);
  std::vector<PolicySequence> seqs(4);
  std::mt19937 rng(7);
  std::bernoulli_distribution accept(a);
  std::vector<int> gamma(4, 0);
  std::vector<bool> drafted;
  for (int64_t step = 0; step < steps; ++step) {
    for (size_t i = 0; i < 4; ++i) {
      if (gamma[i] > 0) {
        int k = 0;
        while (k < gamma[i] && accept(rng)) ++k;
        stats[i].observe(gamma[i], k, step);
        policy.engine_acceptance().observe(gamma[i], k);
      }
      seqs[i] = {&stats[i], 512, 15};
    }
    const StepDraftChoice choice = policy.choose_step(step, seqs);
    gamma.assign(choice.gamma.begin(), choice.gamma.end());
    const bool drafting = choice.drafted > 0;
    if (choice.plain_check && first_check && *first_check < 0) *first_check = step;
    if (choice.plain_check)
      EXPECT_TRUE(!drafting && std::all_of(gamma.begin(), gamma.end(), [](int g) { return g == 0; }))
          << "a plain check zeroes every γ";
    policy.observe_step(drafting, choice.model_seconds, drafting ? choice.model_seconds : plain_ms * kMs);
    drafted.push_back(drafting);
  }
  return drafted;
}

double drafting_share(const std::vector<bool>& d, size_t from) {
  return static_cast<double>(std::count(d.begin() + static_cast<std::ptrdiff_t>(from), d.end(), true)) /
         static_cast<double>(d.size() - from);
}

// A model that overprices plain steps (a launch-bound small model's calibration) makes drafts at 0.6
// acceptance look worth it (~2.4 tokens a verify for ~1.5 ms against 1 ms a token); the clock says a plain
// step takes 0.4 ms. The policy, drafting every step, times no plain step of its own accord: the plain
// check does, kFirstPlainCheck steps in, and from then on it keeps the rows plain (probes aside).
TEST(DraftLengthPolicy, PlainChecksCatchAModelThatOverpricesPlainSteps) {
  int64_t first = -1;
  const std::vector<bool> d = run_on_clock(0.4, 0.6, 400, &first);
  EXPECT_TRUE(d[1]) << "the model alone drafts";
  EXPECT_GE(first, DraftLengthPolicy::kFirstPlainCheck);
  EXPECT_LE(first, DraftLengthPolicy::kFirstPlainCheck + 4);
  EXPECT_LT(drafting_share(d, 40), 0.1);
}

// The first plain timings set the plain correction to the least of them and the model's (a clock only
// runs long: a first step of a new shape launches without graphs or captures them); later ones move it
// by a tenth.
TEST(DraftLengthPolicy, FirstPlainTimingsTakeTheirLeast) {
  EngineMetrics metrics;
  DraftLengthPolicy policy(adaptive_options(), metrics);
  policy.observe_step(false, 0.010, 0.040);  // a graph capture: four times the prediction
  EXPECT_NEAR(policy.correction().plain, 1.0, 1e-12) << "a long first timing does not raise it";
  policy.observe_step(false, 0.010, 0.005);
  EXPECT_NEAR(policy.correction().plain, 0.5, 1e-12);
  policy.observe_step(false, 0.010, 0.006);
  EXPECT_NEAR(policy.correction().plain, 0.5, 1e-12);
  ASSERT_EQ(policy.plain_steps_observed(), DraftLengthPolicy::kPlainWarmup);
  policy.observe_step(false, 0.010, 0.006);
  EXPECT_NEAR(policy.correction().plain, 0.51, 1e-12);
  // A long plain step past the warm-up moves it by a tenth of at most twice its value.
  policy.observe_step(false, 0.010, 0.040);
  EXPECT_NEAR(policy.correction().plain, 0.51 + 0.1 * 0.51, 1e-12);
  // Drafting steps move by a tenth from the first (of at most twice the correction).
  policy.observe_step(true, 0.010, 0.040);
  EXPECT_NEAR(policy.correction().drafting, 1.1, 1e-12);
  policy.observe_step(true, 0.010, 0.015);
  EXPECT_NEAR(policy.correction().drafting, 1.1 + 0.1 * (1.5 - 1.1), 1e-12);
}

// Where the clock agrees with the model, drafting stays the choice: a plain check every
// kPlainCheckInterval steps is all the checks cost.
TEST(DraftLengthPolicy, PlainChecksCostLittleWhereDraftsPay) {
  const std::vector<bool> d = run_on_clock(1.0, 0.6, 400);
  EXPECT_GT(drafting_share(d, 2), 0.97);
  EXPECT_LT(drafting_share(d, 2), 1.0) << "checks keep timing plain steps";
}

}  // namespace
}  // namespace specserve::engine
