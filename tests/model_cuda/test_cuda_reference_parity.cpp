// The CUDA backend against the transformers fixtures (same tolerance as the CPU tests in
// tests/model/test_reference_parity.cpp) and against the CPU backend: prompt logits and captured
// layer outputs, decode logits with the greedy continuation, a multi-token extend from the cache.
#include <cstdio>

#include "../model/reference_parity_checks.h"
#include "model_cuda_test_util.h"

namespace specserve {
namespace {

using namespace specserve::testing;

constexpr double kTol = 1e-4;

class CudaReferenceParity : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_GPU();
    gpu_ = load_on(GetParam(), "f32", "cuda");
    cpu_ = load_on(GetParam(), "f32", "cpu");
    ref_ = std::make_unique<Reference>(cuda_fixture_dir(GetParam()));
  }
  std::unique_ptr<TargetModel> gpu_, cpu_;
  std::unique_ptr<Reference> ref_;
};

TEST_P(CudaReferenceParity, PromptLogitsAndLayerOutputs) {
  ASSERT_EQ(gpu_->backend(), "cuda");
  auto prompt = ref_->ids("prompt_ids");
  auto layers = ref_->ids("hidden_layers");
  std::vector<int> capture(layers.begin(), layers.end());
  auto gs = gpu_->new_sequence(), cs = cpu_->new_sequence();
  auto r = run_one(*gpu_, *gs, prompt, SpanMode::Prefill, LogitsWanted::All, capture);
  auto c = run_one(*cpu_, *cs, prompt, SpanMode::Prefill, LogitsWanted::All, capture);
  TensorView want = ref_->f32("prompt_logits");
  const int64_t V = gpu_->vocab_size(), H = gpu_->hidden_size();
  ASSERT_EQ(r.logits.shape()[0], static_cast<int64_t>(prompt.size()));
  ASSERT_EQ(r.logits.view().device, Device::CPU);
  double worst = 0, worst_cpu = 0;
  for (size_t p = 0; p < prompt.size(); ++p) {
    const double e = rel_err(r.logits.as<float>() + p * V, want.as<const float>() + p * V, V);
    const double ec = rel_err(r.logits.as<float>() + p * V, c.logits.as<float>() + p * V, V);
    worst = std::max(worst, e);
    worst_cpu = std::max(worst_cpu, ec);
    EXPECT_LE(e, kTol) << "position " << p;
    EXPECT_LE(ec, kTol) << "position " << p << " vs CPU";
  }
  std::printf("  %s: prompt logits max rel err %.3g (reference), %.3g (CPU)\n", GetParam().c_str(), worst, worst_cpu);
  TensorView hidden = ref_->f32("hidden");  // [C, P, H]
  ASSERT_EQ(r.captured.shape()[0], static_cast<int64_t>(prompt.size()));
  double worst_hidden = 0;
  for (size_t l = 0; l < layers.size(); ++l)
    for (size_t p = 0; p < prompt.size(); ++p) {
      const float* got = r.captured.as<float>() + (p * layers.size() + l) * H;
      const double e = rel_err(got, hidden.as<const float>() + (l * prompt.size() + p) * H, H);
      worst_hidden = std::max(worst_hidden, e);
      EXPECT_LE(e, kTol) << "layer " << layers[l] << " position " << p;
    }
  std::printf("  %s: captured layer outputs max rel err %.3g\n", GetParam().c_str(), worst_hidden);
}

TEST_P(CudaReferenceParity, GreedyContinuationAndDecodeLogits) {
  expect_greedy_continuation_and_decode_logits(*gpu_, *ref_, kTol, GetParam());
}

TEST_P(CudaReferenceParity, ExtendFromCache) { expect_extend_from_cache(*gpu_, *ref_, kTol, GetParam()); }

TEST_P(CudaReferenceParity, HostHelpersStayOnTheCpu) {
  // A drafter on the host uses ops(), embed, final_norm and lm_head on host tensors: the CUDA model
  // gives the CPU model's bits there.
  EXPECT_EQ(gpu_->ops().name(), "cpu");
  EXPECT_EQ(gpu_->embedding_table().device, Device::CPU);
  const int64_t H = gpu_->hidden_size(), V = gpu_->vocab_size();
  const std::vector<int32_t> ids = {1, 7, 42};
  Tensor a = Tensor::empty(DType::F32, {3, H}), b = Tensor::empty(DType::F32, {3, H});
  gpu_->embed(ids, a);
  cpu_->embed(ids, b);
  gpu_->final_norm(a, a);
  cpu_->final_norm(b, b);
  Tensor la = Tensor::empty(DType::F32, {3, V}), lb = Tensor::empty(DType::F32, {3, V});
  gpu_->lm_head(a, la);
  cpu_->lm_head(b, lb);
  EXPECT_EQ(0, std::memcmp(la.as<float>(), lb.as<float>(), la.nbytes()));
}

// With a bf16 KV cache on both backends (f32 weights) the GPU stays the CPU's match: both store k and v
// rounded to nearest even and read them widened exactly, so the same tolerance as the f32 cache holds, for
// the prompt's logits and for decode steps that read the cache.
TEST_P(CudaReferenceParity, Bf16KvCacheAgreesWithTheCpu) {
  auto gpu = load_on(GetParam(), "f32", "cuda", "bf16");
  auto cpu = load_on(GetParam(), "f32", "cpu", "bf16");
  ASSERT_EQ(gpu->kv_dtype(), DType::BF16);
  ASSERT_EQ(cpu->kv_dtype(), DType::BF16);
  EXPECT_EQ(gpu->kv_block_bytes(), cpu->kv_block_bytes());
  auto prompt = ref_->ids("prompt_ids");
  const int64_t V = gpu->vocab_size();
  auto gs = gpu->new_sequence(), cs = cpu->new_sequence();
  auto rg = run_one(*gpu, *gs, prompt, SpanMode::Prefill, LogitsWanted::All);
  auto rc = run_one(*cpu, *cs, prompt, SpanMode::Prefill, LogitsWanted::All);
  // The GPU's prefill attention runs on tensor cores (q and the probabilities rounded to bf16); the CPU's is
  // f32: measured 1.3e-4 to 5.3e-4 on the H200 (a wrong key or head would be O(1)). The extend rows read
  // the keys and values that prefill stored, so they carry the same difference.
  constexpr double kBf16AttentionTol = 2e-3;
  for (size_t p = 0; p < prompt.size(); ++p)
    EXPECT_LE(rel_err(rg.logits.as<float>() + p * V, rc.logits.as<float>() + p * V, V), kBf16AttentionTol)
        << "position " << p;
  const std::vector<int32_t> draft = {3, 1, 4, 1, 5};
  auto eg = run_one(*gpu, *gs, draft, SpanMode::Extend, LogitsWanted::All);
  auto ec = run_one(*cpu, *cs, draft, SpanMode::Extend, LogitsWanted::All);
  for (size_t i = 0; i < draft.size(); ++i)
    EXPECT_LE(rel_err(eg.logits.as<float>() + i * V, ec.logits.as<float>() + i * V, V), kBf16AttentionTol)
        << "extend row " << i;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaReferenceParity, ::testing::ValuesIn(all_fixtures()),
                         [](const auto& i) { return i.param; });
TEST(CudaModelLoading, BackendChoiceIsChecked) {
  LoadOptions o;
  o.backend = "tpu";
  EXPECT_THROW(TargetModel::load(cuda_fixture_dir("qwen3_tied"), o), Error);
  if (!have_gpu()) {
    o.backend = "cuda";
    EXPECT_THROW(TargetModel::load(cuda_fixture_dir("qwen3_tied"), o), Error);  // a one-line error, no crash
  }
  EXPECT_EQ(TargetModel::load(cuda_fixture_dir("qwen3_tied"))->backend(), "cpu");
}

}  // namespace
}  // namespace specserve
