// The adaptive draft policy (engine/draft_length_policy.h) when every draft is wrong (τ = 1, issue 29:
// speculation must stay within 3 % of plain decoding there). A pass of `specserve bench controlled` is
// replayed on the host: a fresh policy, n sequences of a 128-token prompt decoding 128 tokens, each step's
// γ from DraftLengthPolicy::choose_step (the engine's path), every verify rejecting its first draft. The
// steps are priced by the H200 qwen3-8b-like cost table of bench/bench_draft_policy.cpp; what the drafts
// cost over the same steps as plain decode rows is the policy's share of the loss.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "engine/draft_length_policy.h"
#include "milliseconds.h"

namespace specserve::engine {
namespace {

// Up to 16 rows cost about a decode step (4.9 ms), then about 0.11 ms a row; a propose 1.25 ms + 0.06 ms
// a sequence (docs/BENCHMARKS.md, the 8B shape on an H200).
StepCosts gpu_like_step_costs() {
  StepCosts c;
  c.row_knots = {1, 16, 64, 256, 1024};
  for (double ms : {4.9, 5.6, 11.0, 35.0, 130.0}) c.row_seconds.push_back(ms * kMs);
  c.sequence_s = 0.1 * kMs;
  c.context_s = 4.6e-5 * kMs;
  c.propose_s = 1.25 * kMs;
  c.propose_sequence_s = 0.06 * kMs;
  return c;
}

struct PassCost {
  double plain = 0, spec = 0;  // predicted seconds of the decode steps
  int drafting_steps = 0;      // steps with a propose
  int steps = 0;
  double overhead() const { return spec / plain - 1; }
};

// One bench pass of `n` sequences (prompt 128, `tokens` new tokens each) from a fresh policy, every
// draft wrong; the engine's step index starts at `first_step` (its prefill steps came before).
PassCost wrong_drafts_pass(int n, int tokens, int64_t first_step = 1) {
  EngineMetrics metrics;
  EngineOptions options;
  options.draft_policy = DraftPolicy::Adaptive;
  options.step_costs = gpu_like_step_costs();
  DraftLengthPolicy policy(options, metrics);
  const StepCostModel& model = policy.model();
  std::vector<AcceptanceStats> stats(static_cast<size_t>(n));
  std::vector<PolicySequence> seqs(static_cast<size_t>(n));
  std::vector<int> gamma(static_cast<size_t>(n), 0);  // the drafts the next step verifies
  PassCost cost;
  const int64_t prompt = 128;
  // Step k of the pass: every sequence verifies its drafts (each rejected at the first), commits one
  // token, and the policy chooses the next step's drafts. The first token came with the prefill.
  for (int k = 0; k + 1 < tokens; ++k) {
    const int64_t step = first_step + k;
    const int64_t context = prompt + k + 1;
    double rows = 0, extra = 0;
    for (size_t i = 0; i < gamma.size(); ++i) {
      rows += 1 + gamma[i];
      extra += gamma[i] * static_cast<double>(context);
      if (gamma[i] > 0) {
        stats[i].observe(gamma[i], 0, step);
        policy.engine_acceptance().observe(gamma[i], 0);
      }
    }
    const double ctx = static_cast<double>(n) * static_cast<double>(context);
    cost.plain += model.step_seconds(n, n, ctx, 0);
    cost.spec += model.step_seconds(rows, n, ctx, extra);
    ++cost.steps;
    const int remaining = tokens - (k + 1);
    for (size_t i = 0; i < seqs.size(); ++i) seqs[i] = {&stats[i], context, std::clamp(remaining - 1, 0, 15)};
    const StepDraftChoice choice = policy.choose_step(step, seqs);  // as Engine::draft_lengths
    double drafting = 0, drafts = 0;
    for (size_t i = 0; i < gamma.size(); ++i) {
      gamma[i] = choice.gamma[i];
      drafting += gamma[i] > 0;
      drafts += gamma[i];
    }
    if (drafting > 0) {
      cost.spec += model.propose_seconds(drafting, drafting * static_cast<double>(context + 1), drafts);
      ++cost.drafting_steps;
    }
  }
  return cost;
}

// Issue 29's τ = 1 bar is 0.97× plain for the whole pass. A fresh policy's pass pays for a few verifies on
// the prior (kDefaultPrior: at 16 sequences all of them draft 2 in the first step), the free first probe
// step and the budget's probes; what it leaves of the 3 % goes to what the model does not price (the
// drafter's context hand-off, host work). 8B cost table, 128 tokens: +1.4 / 1.2 / 0.5 % at 1 / 16 / 64
// sequences (with the 2 % budget and a plain step of starting credit: +1.6 / 3.1 / 2.5 %).
TEST(DraftPolicyWrongDrafts, AFreshPassCostsAtMostOneAndAHalfPercent) {
  for (int n : {1, 16, 64}) {
    const PassCost c = wrong_drafts_pass(n, 128);
    std::printf("%2d sequences: %d of %d steps propose, +%.2f %% over plain (%.1f vs %.1f ms)\n", n, c.drafting_steps,
                c.steps, 100 * c.overhead(), c.spec / kMs, c.plain / kMs);
    EXPECT_LE(c.overhead(), 0.015) << n << " sequences";
  }
}

// A long run (a serving engine that has seen only wrong drafts): the probes' share approaches
// kProbeBudget, at most 0.6 % (with the 2 % budget: +0.9 / 1.2 / 0.7 %).
TEST(DraftPolicyWrongDrafts, ALongRunCostsAboutTheProbeBudget) {
  for (int n : {1, 16, 64}) {
    const PassCost c = wrong_drafts_pass(n, 2048);
    std::printf("%2d sequences, 2048 tokens: %d of %d steps propose, +%.2f %% over plain\n", n, c.drafting_steps,
                c.steps, 100 * c.overhead());
    EXPECT_LE(c.overhead(), DraftLengthPolicy::kProbeBudget + 0.001) << n << " sequences";
  }
}

}  // namespace
}  // namespace specserve::engine
