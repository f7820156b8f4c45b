// The picker (engine/row_picker.h): chosen once per sequence per step, and whichever is chosen the
// tokens are the same: the device argmax is taken only where it IS the sampling pipeline's pick.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <span>
#include <vector>

#include "backend/ops.h"
#include "core/error.h"
#include "engine/row_picker.h"

namespace specserve::engine {
namespace {

sampling::RequestParams params(float temperature, bool logprobs = false) {
  sampling::RequestParams p;
  p.sampling.temperature = temperature;
  p.sampling.logprobs = logprobs;
  p.sampling.seed = 7;
  return p;
}

TEST(RowPicker, DeviceArgmaxOnlyWhereItIsThePipelinesPick) {
  const sampling::VocabBounds vocab{100, 90};
  const sampling::Sampler greedy(params(0.0f), vocab), sampled(params(0.8f), vocab),
      with_logprobs(params(0.0f, true), vocab);
  for (VerifyMode mode : {VerifyMode::SampleMatch, VerifyMode::RawArgmax}) {
    // A decode row or a prefill's last row: no drafts to judge.
    EXPECT_EQ(choose_picker(greedy, false, false, mode), Picker::DeviceArgmax);
    EXPECT_EQ(choose_picker(sampled, false, false, mode), Picker::SamplingPipeline);
    EXPECT_EQ(choose_picker(with_logprobs, false, false, mode), Picker::SamplingPipeline);
    // Sampled drafts are judged with min(1, p/q): the rows must come to the host.
    EXPECT_EQ(choose_picker(greedy, true, true, mode), Picker::SamplingPipeline);
  }
  EXPECT_EQ(choose_picker(greedy, true, false, VerifyMode::SampleMatch), Picker::DeviceArgmax);
  EXPECT_EQ(choose_picker(greedy, true, false, VerifyMode::RawArgmax), Picker::SamplingPipeline);
  EXPECT_EQ(choose_picker(sampled, true, false, VerifyMode::SampleMatch), Picker::SamplingPipeline);

  EXPECT_EQ(argmax_columns(Picker::DeviceArgmax, greedy), 90);
  EXPECT_EQ(argmax_columns(Picker::SamplingPipeline, greedy), 0);
}

// Verify rows with ties, NaNs and a large padding logit: the device picker (fed Ops::argmax of the rows
// over the real vocabulary) and the sampling pipeline accept the same drafts and pick the same tokens,
// leaving the same history.
TEST(RowPicker, BothPickersAgreeForAGreedySequence) {
  const int64_t V = 300, real = 290;
  const sampling::Sampler sampler(params(0.0f), {V, real});
  ASSERT_EQ(choose_picker(sampler, true, false, VerifyMode::SampleMatch), Picker::DeviceArgmax);
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  sampling::SamplerWorkspace ws;
  for (int trial = 0; trial < 60; ++trial) {
    const int k = trial % 5;  // drafts 0..4 (0: a decode row)
    std::vector<float> logits(static_cast<size_t>((k + 1) * V));
    for (auto& v : logits) v = std::round(nd(rng) * 2) / 2;  // ties
    if (trial % 4 == 0) logits[rng() % logits.size()] = NAN;
    if (trial % 6 == 0) logits[static_cast<size_t>(real + rng() % (V - real))] = 1e30f;  // padding
    std::vector<int32_t> ids(static_cast<size_t>(k + 1));
    cpu_ops().argmax(TensorView::contiguous(logits.data(), DType::F32, {k + 1, V}), real, ids);
    // Drafts that follow the argmaxes for a while, then (sometimes) stray.
    std::vector<int32_t> drafts(ids.begin(), ids.begin() + k);
    if (k > 0 && trial % 3 != 0) drafts[static_cast<size_t>(rng() % k)] = static_cast<int32_t>(rng() % real);

    const std::vector<int32_t> prompt = {1, 2, 3};
    sampling::SamplerState on_host = sampler.make_state(prompt), on_device = sampler.make_state(prompt);
    const Verdict host = pick_rows(Picker::SamplingPipeline, sampler, on_host, drafts, {logits, V, {}}, nullptr,
                                   VerifyMode::SampleMatch, ws);
    const Verdict device =
        pick_rows(Picker::DeviceArgmax, sampler, on_device, drafts, {{}, 0, ids}, nullptr, VerifyMode::SampleMatch, ws);
    EXPECT_EQ(device.accepted, host.accepted) << "trial " << trial;
    EXPECT_EQ(device.tokens, host.tokens) << "trial " << trial;
    EXPECT_EQ(on_device.length(), on_host.length()) << "trial " << trial;
  }
}

TEST(RowPicker, RefusesTooFewRows) {
  const sampling::Sampler sampler(params(0.0f), {10, 0});
  sampling::SamplerWorkspace ws;
  sampling::SamplerState history = sampler.make_state(std::vector<int32_t>{1});
  const std::vector<int32_t> drafts = {4, 5}, one_id = {4};
  EXPECT_THROW(
      pick_rows(Picker::DeviceArgmax, sampler, history, drafts, {{}, 0, one_id}, nullptr, VerifyMode::SampleMatch, ws),
      Error);
  const std::vector<float> one_row(10, 0.0f);
  EXPECT_THROW(pick_rows(Picker::SamplingPipeline, sampler, history, drafts, {one_row, 10, {}}, nullptr,
                         VerifyMode::SampleMatch, ws),
               Error);
}

}  // namespace
}  // namespace specserve::engine
