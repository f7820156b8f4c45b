// Sampler::picks_raw_argmax(): when it is true, the backend's argmax (Ops::argmax over the real
// vocabulary) is exactly pick()'s token, so the engine may pick on the device; any stage that can
// change a logit, or logprobs, turns it off.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/ops.h"
#include "sampling/sampler.h"
#include "sampling_test_util.h"

namespace specserve::sampling {
namespace {

TEST(RawArgmaxPick, BackendArgmaxEqualsPickOnAwkwardRows) {
  const int64_t V = 1000, real = 990;
  Sampler s(greedy(), {V, real});
  ASSERT_TRUE(s.picks_raw_argmax());
  SamplerState history = s.make_state(std::vector<TokenId>{1, 2, 3});
  std::mt19937 rng(5);
  std::normal_distribution<float> nd;
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<float> row(static_cast<size_t>(V));
    for (auto& v : row) v = std::round(nd(rng) * 3) / 3;  // ties
    if (trial % 3 == 0) row[size_t(rng() % V)] = NAN;
    if (trial % 5 == 0) row[size_t(rng() % V)] = INFINITY;
    if (trial % 7 == 0) row[size_t(real + rng() % (V - real))] = 1e30f;  // padding: never picked
    int32_t id = -2;
    cpu_ops().argmax(TensorView::contiguous(row.data(), DType::F32, {1, V}), s.vocab().real(), {&id, 1});
    EXPECT_EQ(id, s.pick(row, history).token) << "trial " << trial;
  }
}

TEST(RawArgmaxPick, EveryLogitChangingStageTurnsItOff) {
  auto with = [](auto change) {
    RequestParams p = greedy();
    change(p);
    return Sampler(p, {100, 0}).picks_raw_argmax();
  };
  EXPECT_TRUE(with([](RequestParams&) {}));
  EXPECT_TRUE(with([](RequestParams& p) { p.sampling.top_k = 5; }));  // shaping: irrelevant at T = 0
  EXPECT_FALSE(with([](RequestParams& p) { p.sampling.temperature = 0.7f; }));
  EXPECT_FALSE(with([](RequestParams& p) { p.sampling.logprobs = true; }));
  EXPECT_FALSE(with([](RequestParams& p) { p.sampling.logit_bias = {{3, 1.0f}}; }));
  EXPECT_FALSE(with([](RequestParams& p) { p.sampling.repetition_penalty = 1.1f; }));
  EXPECT_FALSE(with([](RequestParams& p) { p.sampling.presence_penalty = 0.5f; }));
  EXPECT_FALSE(with([](RequestParams& p) { p.sampling.frequency_penalty = 0.5f; }));
  EXPECT_FALSE(with([](RequestParams& p) { p.sampling.dry.multiplier = 0.8f; }));
  EXPECT_FALSE(with([](RequestParams& p) {
    p.stop.min_tokens = 3;
    p.stop.eos_token_ids = {7};
  }));
}

}  // namespace
}  // namespace specserve::sampling
