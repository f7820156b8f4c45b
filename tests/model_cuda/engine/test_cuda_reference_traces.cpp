// The z-lab reference traces (tests/fixtures/dflash, dflash.md §11.3) with the TARGET on the GPU in
// f32 and the DFlash drafter on the CPU: the engine reproduces every step's drafts, accepted count
// and emitted tokens, and the generated ids — the GPU counterpart of tests/spec/test_reference_traces.cpp,
// with the same end-of-generation rule (max_drafts = remaining − 1 over the full block, so the last
// steps see a prefix of the reference's drafts and commit a prefix of its tokens).
#include <algorithm>

#include "../../spec/spec_test_util.h"
#include "../model_cuda_test_util.h"

namespace specserve {
namespace {

using namespace specserve::spec::testing;

class CudaReferenceTraces : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { SKIP_WITHOUT_GPU(); }
};

TEST_P(CudaReferenceTraces, EngineReproducesEveryStep) {
  const std::string name = GetParam();
  Pair pair(name, "f32", "cuda");
  ASSERT_EQ(pair.target->backend(), "cuda");
  const Trace trace = load_trace(name);
  spec::DFlashProposer proposer(*pair.drafter);
  ASSERT_EQ(proposer.gamma(), 15);
  auto engine = make_engine(*pair.target, &proposer);
  const spec::RequestRun run = spec::run_request(*engine, greedy_request(trace.prompt, trace.max_new_tokens));
  ASSERT_TRUE(run.error.empty()) << run.error;

  EXPECT_EQ(run.tokens, trace.generated) << name;
  EXPECT_EQ(run.tokens, trace.greedy) << name;
  const int64_t end = static_cast<int64_t>(trace.prompt.size()) + trace.max_new_tokens;
  size_t expected_steps = 0;
  for (const auto& s : trace.steps) expected_steps += s.pos + 1 < end ? 1 : 0;
  ASSERT_EQ(run.steps.size(), expected_steps) << name;

  int total_accepted = 0;
  for (size_t i = 0; i < run.steps.size(); ++i) {
    const engine::SpecStep& got = run.steps[i];
    const TraceStep& ref = trace.steps[i];
    const int64_t remaining = end - got.position - 1;  // tokens still to emit after the pending one
    const size_t n = static_cast<size_t>(std::min<int64_t>(15, remaining - 1));
    const int accepted = std::min(ref.accepted, static_cast<int>(n));
    EXPECT_EQ(got.position, ref.pos) << name << " step " << i;
    ASSERT_EQ(got.drafts.size(), n) << name << " step " << i;
    // Legacy fixtures (spec_test_util.h, Trace::exact_rope): only the deciding drafts (the accepted
    // ones and the first rejected one) must agree; regenerated fixtures are compared in full.
    const size_t checked = trace.exact_rope ? n : std::min(n, static_cast<size_t>(accepted) + 1);
    EXPECT_EQ(std::vector<int32_t>(got.drafts.begin(), got.drafts.begin() + checked),
              std::vector<int32_t>(ref.drafts.begin(), ref.drafts.begin() + checked))
        << name << " step " << i;
    EXPECT_EQ(got.accepted, accepted) << name << " step " << i;
    EXPECT_EQ(got.emitted, std::vector<int32_t>(ref.emitted.begin(), ref.emitted.begin() + accepted + 1))
        << name << " step " << i;
    total_accepted += got.accepted;
  }
  RecordProperty("accepted_total", total_accepted);
}

INSTANTIATE_TEST_SUITE_P(Pairs, CudaReferenceTraces, ::testing::Values("dense-trained", "hybrid-trained"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace specserve
