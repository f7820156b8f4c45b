// End to end against the z-lab reference loop (dflash.md §11.3): the engine with the DFlash proposer,
// one request at T = 0 from trace.json's prompt, reproduces every step's drafts, accepted count and
// committed tokens, and the generated ids, for the dense and the hybrid pairs in f32.
//
// The reference always drafts a full block and runs until its pending position reaches
// prompt + max_new_tokens, emitting tokens past the end that it then cuts. The engine asks for no
// more drafts than can still be emitted (max_drafts = remaining − 1, over the same full block), so
// in the last steps it sees a prefix of the reference's drafts, accepts min(reference, that many),
// and commits the matching prefix of the reference's tokens; and it stops once max_tokens are out.
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

  EXPECT_EQ(run.tokens, trace.generated) << name;
  EXPECT_EQ(run.tokens, trace.greedy) << name;
  const int64_t end = static_cast<int64_t>(trace.prompt.size()) + trace.max_new_tokens;
  size_t expected_steps = 0;
  for (const auto& s : trace.steps) expected_steps += s.pos + 1 < end ? 1 : 0;
  ASSERT_EQ(run.steps.size(), expected_steps) << name;

  int total_accepted = 0, flipped = 0;
  for (size_t i = 0; i < run.steps.size(); ++i) {
    const engine::SpecStep& got = run.steps[i];
    const TraceStep& ref = trace.steps[i];
    // Tokens still to emit after the pending one; the step commits at most that many.
    const int64_t remaining = end - got.position - 1;
    const size_t n = static_cast<size_t>(std::min<int64_t>(15, remaining - 1));
    EXPECT_EQ(got.position, ref.pos) << name << " step " << i;
    const int accepted = std::min(ref.accepted, static_cast<int>(n));
    ASSERT_EQ(got.drafts.size(), n) << name << " step " << i;
    for (size_t k = 0; k < n; ++k) {
      // Legacy fixtures (spec_test_util.h): only the drafts that decide the step — the accepted
      // ones and the first rejected one — must agree; later low-margin slots may flip.
      if (trace.exact_rope || k <= static_cast<size_t>(accepted)) {
        EXPECT_EQ(got.drafts[k], ref.drafts[k]) << name << " step " << i << " slot " << k + 1;
      } else {
        flipped += got.drafts[k] != ref.drafts[k];
      }
    }
    EXPECT_EQ(got.accepted, accepted) << name << " step " << i;
    EXPECT_EQ(got.emitted, std::vector<int32_t>(ref.emitted.begin(), ref.emitted.begin() + accepted + 1))
        << name << " step " << i;
    total_accepted += got.accepted;
  }
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
