#pragma once
// The draft-length policies' lossless check (docs/DESIGN.md §1, docs/DFLASH.md §13), shared by the CPU suite
// (test_lossless_policies.cpp) and the GPU one (../model_cuda/engine/test_cuda_adaptive_policy.cpp): scripted
// step cost tables (so that nothing depends on timing), the engine run under a policy, and the check that
// the fixed and adaptive policies give plain decoding's tokens.
#include <algorithm>
#include <optional>
#include <random>
#include <set>
#include <string>

#include "spec_test_util.h"

namespace specserve::spec::testing {

// Rows of a step cost the same up to `knee` rows, then `per_row_ms` each; a propose costs `propose_ms`.
inline StepCosts cost_table(double knee, double per_row_ms, double propose_ms) {
  StepCosts c;
  knee = std::max(2.0, knee);
  for (double r : {1.0, knee, 4 * knee}) {
    c.row_knots.push_back(r);
    c.row_seconds.push_back((1 + per_row_ms * std::max(0.0, r - knee)) * 1e-3);
  }
  c.propose_s = propose_ms * 1e-3;
  return c;
}

struct PolicyRun {
  std::vector<RequestRun> runs;
  uint64_t drafts = 0, plain_rows = 0;
};

inline PolicyRun run_policy(Pair& pair, DFlashProposer* proposer, std::optional<StepCosts> costs,
                            const std::vector<engine::GenerationRequest>& reqs) {
  engine::EngineOptions o = engine_options(16);
  if (costs) {
    o.draft_policy = engine::DraftPolicy::Adaptive;
    o.step_costs = costs;
    o.step_cost_feedback = false;  // the scripted table decides, not this machine's clock
  }
  auto e = make_engine(*pair.target, proposer, o);
  PolicyRun r;
  r.runs = run_all(*e, reqs);
  r.drafts = e->metrics().spec_num_drafts.load();
  r.plain_rows = e->metrics().spec_policy_plain.load();
  return r;
}

// `sequences` requests (half in the pairs' synthetic language, half random; max_tokens from `max_tokens`,
// seeds from `seed`) give plain decoding's tokens under the fixed policy and the adaptive policy on the
// tables where drafting pays and where it never does, and the policies draft as those tables say.
inline void expect_policies_lossless(Pair& pair, int sequences, bool seeded, const std::string& what,
                                     int64_t max_tokens = 24, uint64_t seed = 500) {
  std::vector<engine::GenerationRequest> reqs;
  std::mt19937 rng(static_cast<uint32_t>(sequences));
  for (int i = 0; i < sequences; ++i) {
    std::vector<int32_t> prompt;
    if (i % 2 == 0) {
      // The synthetic language the trained pairs continue predictably (high acceptance).
      for (int k = 0; k < 6 + i; ++k) prompt.push_back(7 + 5 * ((k + i) % 12));
    } else {
      for (int k = 0; k < 5 + 3 * i; ++k) prompt.push_back(static_cast<int32_t>(rng() % 300));
    }
    const int64_t tokens = max_tokens + 5 * (i % 4);
    reqs.push_back(seeded ? sampled_request(prompt, tokens, seed + static_cast<uint64_t>(i), 0.8f, 0.9f)
                          : greedy_request(prompt, tokens));
  }
  const PolicyRun plain = run_policy(pair, nullptr, std::nullopt, reqs);
  DFlashProposer proposer(*pair.drafter, {.gamma = 15});
  const PolicyRun fixed = run_policy(pair, &proposer, std::nullopt, reqs);
  // Verify rows free up to about 8 a sequence, then a fiftieth of a step each.
  const PolicyRun pays = run_policy(pair, &proposer, cost_table(std::max(48, 8 * sequences), 0.02, 0.1), reqs);
  const PolicyRun never = run_policy(pair, &proposer, cost_table(1, 1.0, 5.0), reqs);
  std::set<size_t> draft_lengths;
  for (int i = 0; i < sequences; ++i) {
    const auto& want = plain.runs[static_cast<size_t>(i)];
    ASSERT_TRUE(want.error.empty()) << want.error;
    for (const PolicyRun* r : {&fixed, &pays, &never}) {
      ASSERT_TRUE(r->runs[static_cast<size_t>(i)].error.empty()) << r->runs[static_cast<size_t>(i)].error;
      EXPECT_EQ(r->runs[static_cast<size_t>(i)].tokens, want.tokens) << what << ", request " << i;
    }
    for (const auto& s : pays.runs[static_cast<size_t>(i)].steps) draft_lengths.insert(s.drafts.size());
  }
  EXPECT_GT(fixed.drafts, 0u) << what;
  EXPECT_GT(pays.drafts, 0u) << what;
  // Where drafting pays the policy still varies γ (drafts near max_tokens aside, fixed would not).
  // At 16 sequences the pairs' first verifies reject every draft, which stops them all until probes
  // (docs/DFLASH.md §13.2); there γ varies only between 0 and one length.
  EXPECT_GT(draft_lengths.size(), sequences >= 9 ? 1u : 2u) << what << ": " << ::testing::PrintToString(draft_lengths);
  // Where it never pays, only probes draft.
  EXPECT_GT(never.plain_rows, 0u) << what;
  EXPECT_LT(never.drafts, fixed.drafts / 4 + 1) << what;
}

}  // namespace specserve::spec::testing
