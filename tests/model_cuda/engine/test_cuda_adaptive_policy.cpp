// The promise across draft-length policies on the GPU (docs/DESIGN.md §1, docs/DFLASH.md §13): the trained
// dense and hybrid pairs on CUDA, 1 and 9 sequences at once, T = 0 and seeded T > 0, give the tokens of
// plain decoding under the fixed policy (γ 15) and under the adaptive policy on scripted step cost tables
// (so that nothing depends on timing): one where drafting pays (γ varies per sequence and step) and one
// where it never does (plain rows but for probes).
#include <algorithm>
#include <optional>
#include <random>
#include <set>

#include "../../spec/spec_test_util.h"
#include "../model_cuda_test_util.h"

namespace specserve {
namespace {

using namespace specserve::spec::testing;

// Rows of a step cost the same up to `knee` rows, then `per_row_ms` each; a propose costs `propose_ms`.
StepCosts cost_table(double knee, double per_row_ms, double propose_ms) {
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

PolicyRun run_policy(TargetModel& target, spec::DFlashProposer* proposer, std::optional<StepCosts> costs,
                     const std::vector<engine::GenerationRequest>& reqs) {
  engine::EngineOptions o = engine_options(16);
  if (costs) {
    o.draft_policy = engine::DraftPolicy::Adaptive;
    o.step_costs = costs;
    o.step_cost_feedback = false;  // the scripted table decides, not this machine's clock
  }
  auto e = make_engine(target, proposer, o);
  PolicyRun r;
  r.runs = run_all(*e, reqs);
  r.drafts = e->metrics().spec_num_drafts.load();
  r.plain_rows = e->metrics().spec_policy_plain.load();
  return r;
}

using Param = std::tuple<std::string, std::string, int>;  // pair, dtype, sequences

class CudaAdaptivePolicy : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override { SKIP_WITHOUT_GPU(); }

  void expect_lossless(bool seeded) {
    const auto& [pair_name, dtype, sequences] = GetParam();
    Pair pair(pair_name, dtype, "cuda");
    ASSERT_EQ(pair.drafter->backend(), "cuda");
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
      const int64_t max_tokens = 40 + 5 * (i % 4);
      reqs.push_back(seeded ? sampled_request(prompt, max_tokens, 700 + i, 0.8f, 0.9f)
                            : greedy_request(prompt, max_tokens));
    }
    const PolicyRun plain = run_policy(*pair.target, nullptr, std::nullopt, reqs);
    spec::DFlashProposer proposer(*pair.drafter, {.gamma = 15});
    const PolicyRun fixed = run_policy(*pair.target, &proposer, std::nullopt, reqs);
    const PolicyRun pays =
        run_policy(*pair.target, &proposer, cost_table(std::max(48, 8 * sequences), 0.02, 0.1), reqs);
    const PolicyRun never = run_policy(*pair.target, &proposer, cost_table(1, 1.0, 5.0), reqs);
    const std::string what =
        pair_name + " " + dtype + ", " + std::to_string(sequences) + " sequences, " + (seeded ? "seeded" : "T=0");
    std::set<size_t> draft_lengths;
    for (int i = 0; i < sequences; ++i) {
      const auto& want = plain.runs[static_cast<size_t>(i)];
      ASSERT_TRUE(want.error.empty()) << want.error;
      for (const PolicyRun* r : {&fixed, &pays, &never}) {
        const auto& got = r->runs[static_cast<size_t>(i)];
        ASSERT_TRUE(got.error.empty()) << got.error;
        EXPECT_EQ(got.tokens, want.tokens) << what << ", request " << i;
      }
      for (const auto& s : pays.runs[static_cast<size_t>(i)].steps) draft_lengths.insert(s.drafts.size());
    }
    EXPECT_GT(fixed.drafts, 0u) << what;
    EXPECT_GT(pays.drafts, 0u) << what;
    // Where drafting pays the policy varies γ (beyond the cut near max_tokens the fixed policy makes).
    // At 16 sequences the pairs' first verifies reject every draft, which stops them all until probes
    // (docs/DFLASH.md §13.2); there γ varies only between 0 and one length.
    EXPECT_GT(draft_lengths.size(), sequences >= 9 ? 1u : 2u)
        << what << ": " << ::testing::PrintToString(draft_lengths);
    // Where it never pays, only probes draft.
    EXPECT_GT(never.plain_rows, 0u) << what;
    EXPECT_LT(never.drafts, fixed.drafts / 4 + 1) << what;
  }
};

TEST_P(CudaAdaptivePolicy, GreedyIdenticalToPlainDecoding) { expect_lossless(false); }
TEST_P(CudaAdaptivePolicy, SeededSamplingIdenticalToPlainDecoding) { expect_lossless(true); }

INSTANTIATE_TEST_SUITE_P(Pairs, CudaAdaptivePolicy,
                         ::testing::Combine(::testing::Values("dense-trained", "hybrid-trained"),
                                            ::testing::Values("f32", "bf16"), ::testing::Values(1, 9)),
                         [](const auto& info) {
                           std::string n = std::get<0>(info.param) + "_" + std::get<1>(info.param) + "_" +
                                           std::to_string(std::get<2>(info.param));
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace specserve
