// The promise (docs/DESIGN.md §1) with fp8 weights kept in memory (`--fp8-weights keep`, docs/MODELS.md
// §6.1) on the CPU: each DFlash pair's target is quantised to Qwen's block-128 fp8 (tests/model/
// fp8_checkpoint_writer.h) and loaded with its weights kept fp8; greedy and seeded T > 0 generations with the
// drafter equal plain decoding, and plain decoding equals the dequantised (bf16) load of the same checkpoint.
// The drafter quantised the same way drafts exactly as its dequantised twin.
#include <cstring>

#include "../model/fp8_checkpoint_writer.h"
#include "spec/dflash_checkpoint.h"
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

// A drafter shipped in the same fp8 format: its Linear weights (fc and the layers' projections) are
// dequantised at load, exactly as its dequantised twin stores them, so its drafts are the twin's, step for
// step; `--dtype auto` gives bf16 as for an fp8 target; and speculation stays equal to plain decoding.
TEST_P(Fp8Lossless, Fp8DrafterDraftsAsItsDequantisedTwin) {
  ScratchDir fp8("drafter-fp8"), dequantised("drafter-deq");
  const auto quantised =
      write_fp8_pair(pair_dir(GetParam()) + "/draft", fp8.path(), dequantised.path(), DType::BF16).quantized;
  ASSERT_FALSE(quantised.empty());
  EXPECT_EQ(quantised.front(), "fc.weight");
  auto target = TargetModel::load(pair_dir(GetParam()) + "/target", {.dtype = "f32"});
  TargetShape shape{target->hidden_size(), target->vocab_size(), target->embedding_table().dim(0),
                    target->config().num_layers};
  // Loaded: every matrix the twin's, bit for bit, in f32 and in bf16 (auto for the fp8 checkpoint).
  for (const char* dtype : {"f32", "auto"}) {
    const auto a = DrafterCheckpoint::load(fp8.path(), shape, dtype);
    const auto b = DrafterCheckpoint::load(dequantised.path(), shape, std::string(dtype) == "auto" ? "bf16" : dtype);
    EXPECT_EQ(a->matrix_dtype(), std::string(dtype) == "auto" ? DType::BF16 : DType::F32);
    auto same = [&](const TensorView& x, const TensorView& y, const std::string& what) {
      ASSERT_EQ(x.dtype, y.dtype) << what;
      ASSERT_EQ(x.nbytes(), y.nbytes()) << what;
      EXPECT_EQ(std::memcmp(x.data, y.data, x.nbytes()), 0) << what << " (" << dtype << ")";
    };
    same(a->weights().fc, b->weights().fc, "fc");
    for (size_t i = 0; i < a->weights().layers.size(); ++i) {
      const auto &la = a->weights().layers[i], &lb = b->weights().layers[i];
      same(la.q_proj, lb.q_proj, "q_proj");
      same(la.o_proj, lb.o_proj, "o_proj");
      same(la.down, lb.down, "down");
    }
  }
  // Generating: the fp8 drafter's verify steps are the twin's (the same drafts), and both equal plain decoding.
  auto drafter = DFlashDrafter::load(fp8.path(), *target, "f32");
  auto twin = DFlashDrafter::load(dequantised.path(), *target, "f32");
  const Trace trace = load_trace(GetParam());
  std::vector<engine::GenerationRequest> plain_reqs, fp8_reqs, twin_reqs;
  for (auto* reqs : {&plain_reqs, &fp8_reqs, &twin_reqs}) {
    reqs->push_back(greedy_request(trace.prompt, 32));
    reqs->push_back(sampled_request(trace.prompt, 32, 77, 0.8f));
  }
  auto plain_engine = make_engine(*target, nullptr);
  const auto plain = run_all(*plain_engine, std::move(plain_reqs));
  DFlashProposer fp8_proposer(*drafter, {.gamma = 15}), twin_proposer(*twin, {.gamma = 15});
  auto fp8_engine = make_engine(*target, &fp8_proposer);
  const auto with_fp8 = run_all(*fp8_engine, std::move(fp8_reqs));
  auto twin_engine = make_engine(*target, &twin_proposer);
  const auto with_twin = run_all(*twin_engine, std::move(twin_reqs));
  int64_t accepted = 0;
  for (size_t i = 0; i < plain.size(); ++i) {
    ASSERT_TRUE(plain[i].error.empty() && with_fp8[i].error.empty() && with_twin[i].error.empty());
    EXPECT_EQ(with_fp8[i].tokens, plain[i].tokens) << "request " << i;
    ASSERT_EQ(with_fp8[i].steps.size(), with_twin[i].steps.size()) << "request " << i;
    for (size_t k = 0; k < with_fp8[i].steps.size(); ++k) {
      EXPECT_EQ(with_fp8[i].steps[k].drafts, with_twin[i].steps[k].drafts) << "request " << i << " step " << k;
      accepted += with_fp8[i].steps[k].accepted;
    }
  }
  EXPECT_GT(accepted, 0) << "the trained fp8 drafter accepted nothing";
}

INSTANTIATE_TEST_SUITE_P(Pairs, Fp8Lossless, ::testing::Values("dense-trained", "hybrid-trained"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace specserve::spec
