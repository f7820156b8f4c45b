// The promise (docs/DESIGN.md §1) with fp8 weights kept in memory (`--fp8-weights keep`, docs/MODELS.md
// §6.1) on the CPU: each DFlash pair's target is quantised to Qwen's block-128 fp8 (tests/model/
// fp8_checkpoint_writer.h) and loaded with its weights kept fp8; greedy and seeded T > 0 generations with the
// drafter equal plain decoding, and plain decoding equals the dequantised (bf16) load of the same checkpoint.
#include "../model/fp8_checkpoint_writer.h"
#include "spec_test_util.h"

namespace specserve::spec {
namespace {

using namespace specserve::spec::testing;
using specserve::testing::ScratchDir;
using specserve::testing::write_fp8_pair;

class Fp8Lossless : public ::testing::TestWithParam<std::string> {};

TEST_P(Fp8Lossless, SpeculativeEqualsPlainWithKeptFp8Weights) {
  ScratchDir fp8("lossless-fp8"), dequantised("lossless-deq");
  write_fp8_pair(pair_dir(GetParam()) + "/target", fp8.path(), dequantised.path(), DType::BF16);
  auto kept = TargetModel::load(fp8.path(), {.fp8_weights = "keep"});
  auto plain_load = TargetModel::load(fp8.path(), {});
  ASSERT_LT(kept->step_weight_bytes(), plain_load->step_weight_bytes()) << "the weights were not kept fp8";
  auto drafter = DFlashDrafter::load(pair_dir(GetParam()) + "/draft", *kept, "bf16");
  const Trace trace = load_trace(GetParam());
  const std::vector<std::vector<int32_t>> prompts = {trace.prompt, {7, 12, 17, 22, 27, 32, 37, 42}, {3, 1, 4, 1, 5}};
  for (int gamma : {3, 15}) {
    std::vector<engine::GenerationRequest> plain_reqs, spec_reqs, deq_reqs;
    for (size_t i = 0; i < prompts.size(); ++i)
      for (auto* reqs : {&plain_reqs, &spec_reqs, &deq_reqs}) {
        reqs->push_back(greedy_request(prompts[i], 24));
        reqs->push_back(sampled_request(prompts[i], 24, 1000 + i, 0.8f));
      }
    auto plain_engine = make_engine(*kept, nullptr);
    const auto plain = run_all(*plain_engine, std::move(plain_reqs));
    DFlashProposer proposer(*drafter, {.gamma = gamma});
    auto spec_engine = make_engine(*kept, &proposer);
    const auto spec = run_all(*spec_engine, std::move(spec_reqs));
    auto deq_engine = make_engine(*plain_load, nullptr);
    const auto deq = run_all(*deq_engine, std::move(deq_reqs));
    int64_t accepted = 0;
    for (size_t i = 0; i < plain.size(); ++i) {
      ASSERT_TRUE(plain[i].error.empty() && spec[i].error.empty() && deq[i].error.empty());
      EXPECT_EQ(spec[i].tokens, plain[i].tokens) << "gamma " << gamma << ", request " << i;
      EXPECT_EQ(deq[i].tokens, plain[i].tokens) << "dequantised, request " << i;
      for (const auto& s : spec[i].steps) accepted += s.accepted;
    }
    // A trained pair must actually speculate, or this test would prove little.
    if (GetParam() != "dense-random") EXPECT_GT(accepted, 0) << "gamma " << gamma;
  }
}

INSTANTIATE_TEST_SUITE_P(Pairs, Fp8Lossless, ::testing::Values("dense-trained", "hybrid-trained"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace specserve::spec
