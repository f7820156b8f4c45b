// Parity with Hugging Face transformers (fp32 fixtures from tools/reference/model/make_fixtures.py):
// prompt logits at every position, captured layer outputs, a >= 32-token greedy continuation with the
// logits of its first decode steps, and a multi-token extend on top of the prompt's cache; for Qwen3
// untied / tied and Qwen3.5 in both checkpoint layouts.
#include <cmath>
#include <cstdio>

#include "reference_parity_checks.h"

namespace specserve {
namespace {

using namespace specserve::testing;

constexpr double kTol = 1e-4;

class ReferenceParity : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = fixture_dir(GetParam());
    model_ = TargetModel::load(dir_, {.dtype = "f32"});
    ref_ = std::make_unique<Reference>(dir_);
  }
  std::string dir_;
  std::unique_ptr<TargetModel> model_;
  std::unique_ptr<Reference> ref_;
};

TEST_P(ReferenceParity, PromptLogitsAndLayerOutputs) {
  auto prompt = ref_->ids("prompt_ids");
  auto layers = ref_->ids("hidden_layers");
  auto seq = model_->new_sequence();
  auto r = run_one(*model_, *seq, prompt, SpanMode::Prefill, LogitsWanted::All,
                   std::vector<int>(layers.begin(), layers.end()));
  TensorView want = ref_->f32("prompt_logits");
  const int64_t V = model_->vocab_size(), H = model_->hidden_size();
  ASSERT_EQ(r.logits.shape()[0], static_cast<int64_t>(prompt.size()));
  double worst = 0;
  for (size_t p = 0; p < prompt.size(); ++p) {
    const double e = rel_err(r.logits.as<float>() + p * V, want.as<const float>() + p * V, V);
    worst = std::max(worst, e);
    EXPECT_LE(e, kTol) << "position " << p;
  }
  RecordProperty("max_rel_err_prompt", std::to_string(worst));
  std::printf("  %s: prompt logits max rel err %.3g over %zu positions\n", GetParam().c_str(), worst, prompt.size());
  TensorView hidden = ref_->f32("hidden");  // [C, P, H]
  double worst_hidden = 0;
  for (size_t c = 0; c < layers.size(); ++c)
    for (size_t p = 0; p < prompt.size(); ++p) {
      std::vector<float> got(r.captured.as<float>() + (p * layers.size() + c) * H,
                             r.captured.as<float>() + (p * layers.size() + c + 1) * H);
      const double e = rel_err(got.data(), hidden.as<const float>() + (c * prompt.size() + p) * H, H);
      worst_hidden = std::max(worst_hidden, e);
      EXPECT_LE(e, kTol) << "layer " << layers[c] << " position " << p;
    }
  std::printf("  %s: captured layer outputs max rel err %.3g\n", GetParam().c_str(), worst_hidden);
}

TEST_P(ReferenceParity, GreedyContinuationAndDecodeLogits) {
  expect_greedy_continuation_and_decode_logits(*model_, *ref_, kTol, GetParam());
}

// The prompt as extend rows (the decode and verify path, DeltaNet stepped token by token) instead of a prefill:
// the same continuation.
TEST_P(ReferenceParity, GreedyContinuationFromExtendRows) {
  expect_greedy_continuation_and_decode_logits(*model_, *ref_, kTol, GetParam(), SpanMode::Extend);
}

TEST_P(ReferenceParity, ExtendFromCache) { expect_extend_from_cache(*model_, *ref_, kTol, GetParam()); }

TEST_P(ReferenceParity, Bf16WeightsStayClose) {
  // Not a parity claim (transformers was run in f32): bf16 storage must load and give logits of the
  // same shape, within bf16 rounding of the f32 ones.
  auto bf = TargetModel::load(dir_, {.dtype = "bf16"});
  EXPECT_EQ(bf->weight_dtype(), DType::BF16);
  auto prompt = ref_->ids("prompt_ids");
  auto seq = bf->new_sequence();
  auto r = run_one(*bf, *seq, prompt, SpanMode::Prefill, LogitsWanted::Last);
  TensorView want = ref_->f32("prompt_logits");
  const int64_t V = bf->vocab_size();
  EXPECT_LE(rel_err(r.logits.as<float>(), want.as<const float>() + (prompt.size() - 1) * V, V), 0.1);
}

// The KV cache's element type: auto follows the weights (f32 for this f32 parity model), a bf16 cache
// takes half the bytes a block, and a prefill then decode with it stays within bf16 rounding of the f32
// cache's logits.
TEST_P(ReferenceParity, KvCacheDtypes) {
  EXPECT_EQ(model_->kv_dtype(), DType::F32);
  auto half = TargetModel::load(dir_, {.dtype = "f32", .kv_dtype = "bf16"});
  EXPECT_EQ(half->kv_dtype(), DType::BF16);
  EXPECT_EQ(half->kv_block_bytes() * 2, model_->kv_block_bytes());
  auto bf_auto = TargetModel::load(dir_, {.dtype = "bf16"});
  EXPECT_EQ(bf_auto->kv_dtype(), DType::BF16);
  EXPECT_EQ(TargetModel::load(dir_, {.dtype = "bf16", .kv_dtype = "f32"})->kv_dtype(), DType::F32);
  EXPECT_THROW(TargetModel::load(dir_, {.kv_dtype = "f16"}), Error);
  auto prompt = ref_->ids("prompt_ids");
  auto a = model_->new_sequence(), b = half->new_sequence();
  const std::vector<int32_t> next = {static_cast<int32_t>(prompt.back())};
  for (TargetModel* m : {model_.get(), half.get()}) {
    auto& s = m == model_.get() ? *a : *b;
    run_one(*m, s, prompt, SpanMode::Prefill, LogitsWanted::None);
  }
  auto ra = run_one(*model_, *a, next, SpanMode::Extend, LogitsWanted::All);
  auto rb = run_one(*half, *b, next, SpanMode::Extend, LogitsWanted::All);
  const int64_t V = model_->vocab_size();
  for (int64_t i = 0; i < V; ++i) ASSERT_TRUE(std::isfinite(rb.logits.as<float>()[i])) << i;
  EXPECT_LE(rel_err(rb.logits.as<float>(), ra.logits.as<float>(), V), 0.05);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ReferenceParity, ::testing::ValuesIn(all_fixtures()),
                         [](const auto& i) { return i.param; });
// Checkpoints in Qwen's FP8 format quantised by transformers: --dtype f32 dequantises every block exactly, so
// the logits follow the fp32 reference of the dequantised model as closely as a bf16 checkpoint's do.
INSTANTIATE_TEST_SUITE_P(Fp8Fixtures, ReferenceParity, ::testing::ValuesIn(fp8_fixtures()),
                         [](const auto& i) { return i.param; });

TEST(ModelLoading, MappedWeightsGiveTheSameBits) {
  auto copied = TargetModel::load(fixture_dir("qwen3_5_vl"));
  auto mapped = TargetModel::load(fixture_dir("qwen3_5_vl"), {.dtype = "auto", .map_weights = true});
  const std::vector<int32_t> prompt = {3, 1, 4, 1, 5, 9, 2, 6};
  auto a = copied->new_sequence(), b = mapped->new_sequence();
  auto ra = run_one(*copied, *a, prompt, SpanMode::Prefill);
  auto rb = run_one(*mapped, *b, prompt, SpanMode::Prefill);
  EXPECT_EQ(row(ra.logits, 0), row(rb.logits, 0));
}

TEST(ModelLoading, AutoDtypeAndLayoutDetails) {
  auto m = TargetModel::load(fixture_dir("qwen3_5_vl"));
  EXPECT_EQ(m->weight_dtype(), DType::F32);  // the checkpoint is f32
  EXPECT_EQ(m->config().family, ModelFamily::Qwen3_5);
  EXPECT_THROW(TargetModel::load(fixture_dir("qwen3_tied"), {.dtype = "fp8"}), Error);
  EXPECT_THROW(TargetModel::load(fixture_dir("does_not_exist")), Error);
}

}  // namespace
}  // namespace specserve
