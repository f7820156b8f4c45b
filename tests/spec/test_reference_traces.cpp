// End to end against the z-lab reference loop (docs/DFLASH.md §11.3): the engine with the DFlash proposer,
// one request at T = 0 from trace.json's prompt, reproduces every step's drafts, accepted count and
// committed tokens, and the generated ids, for the dense and the hybrid pairs in f32.
//
// The end-of-generation rule and the legacy-fixture rule: expect_trace_reproduced (spec_test_util.h).
#include "spec_test_util.h"

namespace specserve::spec {
namespace {

using namespace specserve::spec::testing;

class ReferenceTraces : public ::testing::TestWithParam<std::string> {};

TEST_P(ReferenceTraces, EngineReproducesEveryStep) {
  const std::string name = GetParam();
  Pair pair(name, "f32");
  const Trace trace = load_trace(name);
  DFlashProposer proposer(*pair.drafter);
  ASSERT_EQ(proposer.gamma(), 15);
  auto engine = make_engine(*pair.target, &proposer);
  const RequestRun run = run_request(*engine, greedy_request(trace.prompt, trace.max_new_tokens));

  int total_accepted = 0, flipped = 0;
  expect_trace_reproduced(run, trace, name, &total_accepted, &flipped);
  RecordProperty("accepted_total", total_accepted);
  RecordProperty("undecisive_drafts_flipped", flipped);
}

INSTANTIATE_TEST_SUITE_P(Pairs, ReferenceTraces, ::testing::Values("dense-random", "dense-trained", "hybrid-trained"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace specserve::spec
