// EOS and max_tokens falling inside a run of accepted drafts (docs/DFLASH.md §4 step 8): tokens after the
// cut are never emitted, even though the target accepted them, and the output equals plain
// decoding's. Uses the hybrid pair, whose reference trace accepts up to 9 drafts per step.
#include "spec_test_util.h"

namespace specserve::spec {
namespace {

using namespace specserve::spec::testing;

class StopInAcceptedRun : public ::testing::Test {
 protected:
  void SetUp() override {
    pair_ = std::make_unique<Pair>("hybrid-trained", "f32");
    trace_ = load_trace("hybrid-trained");
    proposer_ = std::make_unique<DFlashProposer>(*pair_->drafter);
    engine_ = make_engine(*pair_->target, proposer_.get());
    plain_engine_ = make_engine(*pair_->target, nullptr);
  }
  int64_t prompt_len() const { return static_cast<int64_t>(trace_.prompt.size()); }

  std::unique_ptr<Pair> pair_;
  Trace trace_;
  std::unique_ptr<DFlashProposer> proposer_;
  std::unique_ptr<engine::Engine> engine_, plain_engine_;
};

TEST_F(StopInAcceptedRun, EosInsideAcceptedDraftsEndsTheOutputThere) {
  // Find, in the output for an arithmetic-progression prompt (every token new), a token whose first
  // occurrence is an accepted draft followed by more accepted drafts of the same step; make it EOS.
  std::vector<int32_t> prompt, output;
  int64_t eos_index = -1;  // index into the generated ids
  for (int32_t d = 1; d <= 6 && eos_index < 0; ++d) {
    prompt.clear();
    for (int32_t t = 0; t < 10; ++t) prompt.push_back((20 + t * d) % 300);
    const RequestRun run = run_request(*engine_, greedy_request(prompt, 48));
    output = run.tokens;
    for (const auto& s : run.steps)
      for (int k = 0; k + 1 < s.accepted && eos_index < 0; ++k) {
        const int64_t index = s.position + 1 + k - static_cast<int64_t>(prompt.size());
        if (std::find(output.begin(), output.end(), output[index]) - output.begin() == index &&
            std::find(prompt.begin(), prompt.end(), output[index]) == prompt.end())
          eos_index = index;
      }
  }
  ASSERT_GE(eos_index, 0) << "no accepted run with a new token found";
  const int32_t eos = output[eos_index];

  auto make = [&] {
    engine::GenerationRequest r = greedy_request(prompt, 48);
    r.params.stop.ignore_eos = false;
    r.params.stop.eos_token_ids = {eos};
    return r;
  };
  const RequestRun run = run_request(*engine_, make());
  const std::vector<int32_t> want(output.begin(), output.begin() + eos_index + 1);
  EXPECT_EQ(run.tokens, want);
  EXPECT_EQ(run.finish_reason, engine::FinishReason::Stop);
  // The step that produced the EOS accepted drafts beyond it; they were committed, not emitted.
  const engine::SpecStep& last = run.steps.back();
  EXPECT_GT(last.position + last.accepted, static_cast<int64_t>(prompt.size()) + eos_index);
  EXPECT_EQ(run_request(*plain_engine_, make()).tokens, want);
}

TEST_F(StopInAcceptedRun, MaxTokensInsideAnAcceptedRunCutsThere) {
  // Cut three tokens into the step that the reference accepted most of.
  const auto best = std::max_element(trace_.steps.begin(), trace_.steps.end(),
                                     [](const auto& a, const auto& b) { return a.accepted < b.accepted; });
  ASSERT_GE(best->accepted, 4);
  const int64_t before = best->pos - prompt_len() + 1;  // generated through that step's pending token
  const int64_t max_tokens = before + 3;
  const RequestRun run = run_request(*engine_, greedy_request(trace_.prompt, max_tokens));
  EXPECT_EQ(run.tokens, std::vector<int32_t>(trace_.greedy.begin(), trace_.greedy.begin() + max_tokens));
  EXPECT_EQ(run.finish_reason, engine::FinishReason::Length);
  // The engine asked for only as many drafts as could still be emitted, and accepted them all.
  const engine::SpecStep& last = run.steps.back();
  EXPECT_EQ(last.position, best->pos);
  EXPECT_EQ(last.drafts.size(), 2u);
  EXPECT_EQ(last.accepted, 2);
}

}  // namespace
}  // namespace specserve::spec
