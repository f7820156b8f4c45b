// Logprobs from both documented sources.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "sampling/sampler.h"
#include "sampling_test_util.h"

namespace specserve::sampling {
namespace {

RequestParams with_logprobs(float temperature, int top, LogprobsSource source) {
  RequestParams p;
  p.sampling.temperature = temperature;
  p.sampling.logprobs = true;
  p.sampling.top_logprobs = top;
  p.sampling.logprobs_source = source;
  p.sampling.seed = 3;
  return p;
}

TEST(Logprobs, BeforeTruncationIsLogSoftmaxAfterPenaltiesAndTemperature) {
  RequestParams p = with_logprobs(0.5f, 3, LogprobsSource::kBeforeTruncation);
  p.sampling.top_k = 1;                  // truncation does not affect these logprobs
  p.sampling.logit_bias = {{3, -2.0f}};  // the history stages do
  Sampler s(p, {5, 4});
  const std::vector<float> row = {1.0f, 2.0f, 2.0f, 2.5f, 50.0f};  // id 4 is padding
  const std::vector<TokenId> prompt = {0};
  const Pick pick = s.pick(row, s.make_state(prompt));
  ASSERT_TRUE(pick.logprobs);
  EXPECT_EQ(pick.token, 1);  // top-1 of {1, 2, 2, 0.5}: the tie goes to id 1
  // logits / T = {2, 4, 4, 1}
  const double lse = std::log(std::exp(2.0) + 2 * std::exp(4.0) + std::exp(1.0));
  EXPECT_NEAR(pick.logprobs->chosen, 4.0 - lse, 1e-5);
  ASSERT_EQ(pick.logprobs->top.size(), 3u);
  EXPECT_EQ(pick.logprobs->top[0].id, 1);
  EXPECT_EQ(pick.logprobs->top[1].id, 2);
  EXPECT_EQ(pick.logprobs->top[2].id, 0);
  EXPECT_NEAR(pick.logprobs->top[2].logprob, 2.0 - lse, 1e-5);
}

TEST(Logprobs, GreedyUsesTemperatureOne) {
  Sampler s(with_logprobs(0.0f, 2, LogprobsSource::kBeforeTruncation), {3, 3});
  const std::vector<float> row = {0.0f, std::log(3.0f), -kInf};
  const std::vector<TokenId> prompt = {0};
  const Pick pick = s.pick(row, s.make_state(prompt));
  EXPECT_EQ(pick.token, 1);
  EXPECT_NEAR(pick.logprobs->chosen, std::log(0.75), 1e-6);
  ASSERT_EQ(pick.logprobs->top.size(), 2u);  // -inf entries are never listed
  EXPECT_NEAR(pick.logprobs->top[1].logprob, std::log(0.25), 1e-6);
}

TEST(Logprobs, FinalIsTheDistributionSampledFrom) {
  RequestParams p = with_logprobs(1.0f, 5, LogprobsSource::kFinal);
  p.sampling.top_k = 2;
  Sampler s(p, {4, 4});
  const std::vector<float> row = {0.0f, std::log(3.0f), std::log(1.0f), -1.0f};
  const std::vector<TokenId> prompt = {0};
  const Pick pick = s.pick(row, s.make_state(prompt));
  // top-2 keeps ids 1 and 0 (tie at 0 between ids 0 and 2 goes to 0): probabilities 3/4, 1/4.
  ASSERT_EQ(pick.logprobs->top.size(), 2u);
  EXPECT_EQ(pick.logprobs->top[0].id, 1);
  EXPECT_NEAR(pick.logprobs->top[0].logprob, std::log(0.75), 1e-6);
  EXPECT_EQ(pick.logprobs->top[1].id, 0);
  SamplerWorkspace ws;
  EXPECT_EQ(s.logprobs(row, s.make_state(prompt), 3, ws).chosen, -kInf);  // truncated away

  Sampler g(with_logprobs(0.0f, 5, LogprobsSource::kFinal), {4, 4});
  const Pick gp = g.pick(row, g.make_state(prompt));
  EXPECT_EQ(gp.logprobs->chosen, 0.0f);
  EXPECT_EQ(gp.logprobs->top.size(), 1u);
}

TEST(Logprobs, AbsentUnlessAsked) {
  RequestParams p;
  p.sampling.seed = 1;
  Sampler s(p, {3, 3});
  const std::vector<TokenId> prompt = {0};
  EXPECT_FALSE(s.pick(std::vector<float>{1, 2, 3}, s.make_state(prompt)).logprobs);
}

}  // namespace
}  // namespace specserve::sampling
