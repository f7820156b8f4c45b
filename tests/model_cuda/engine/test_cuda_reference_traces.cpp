// The z-lab reference traces (tests/fixtures/dflash, docs/DFLASH.md §11.3) with the TARGET on the GPU in
// f32 and the DFlash drafter on the GPU beside it: the engine reproduces every step's drafts, accepted count
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
  ASSERT_EQ(pair.drafter->backend(), "cuda");
  const Trace trace = load_trace(name);
  spec::DFlashProposer proposer(*pair.drafter);
  ASSERT_EQ(proposer.gamma(), 15);
  auto engine = make_engine(*pair.target, &proposer);
  const engine::RequestRun run = engine::run_request(*engine, greedy_request(trace.prompt, trace.max_new_tokens));
  ASSERT_TRUE(run.error.empty()) << run.error;

  int total_accepted = 0;
  expect_trace_reproduced(run, trace, name, &total_accepted);
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
