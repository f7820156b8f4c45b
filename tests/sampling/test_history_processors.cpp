// Logit bias, repetition penalty (HF semantics, optional window), presence / frequency penalties
// (OpenAI semantics: output tokens only) and min_tokens masking.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "sampling/history_processors.h"
#include "sampling/sampler.h"
#include "sampling_test_util.h"

namespace specserve::sampling {
namespace {

TEST(LogitBias, AddsToNamedIdsOnly) {
  std::vector<float> row = {1.0f, 2.0f, 3.0f};
  const std::vector<std::pair<TokenId, float>> bias = {{0, -100.0f}, {2, 5.0f}, {7, 1.0f}};  // 7: outside
  apply_logit_bias(row, bias);
  EXPECT_EQ(row, (std::vector<float>{-99.0f, 2.0f, 8.0f}));
}

TEST(RepetitionPenalty, DividesPositiveMultipliesNegativeOncePerId) {
  std::vector<float> row = {2.0f, -2.0f, 3.0f, -1.0f};
  const std::vector<TokenId> prompt = {0, 0, 0, 1};  // 0 seen three times: penalised once
  SamplerState s(prompt);
  apply_repetition_penalty(row, s.window_counts(), 2.0f);
  EXPECT_EQ(row, (std::vector<float>{1.0f, -4.0f, 3.0f, -1.0f}));
}

TEST(RepetitionPenalty, WindowSeesOnlyTheLastTokens) {
  const std::vector<TokenId> prompt = {0, 1, 2};
  SamplerState s(prompt, /*repetition_window=*/2);
  s.push(3);  // window: {2, 3}
  std::vector<float> row = {2.0f, 2.0f, 2.0f, 2.0f};
  apply_repetition_penalty(row, s.window_counts(), 2.0f);
  EXPECT_EQ(row, (std::vector<float>{2.0f, 2.0f, 1.0f, 1.0f}));
}

TEST(PresenceFrequency, OpenAIFormulaOverGeneratedTokensOnly) {
  const std::vector<TokenId> prompt = {0, 0, 0};  // prompt tokens are not penalised
  SamplerState s(prompt);
  s.push(1);
  s.push(1);
  s.push(2);
  std::vector<float> row = {1.0f, 1.0f, 1.0f, 1.0f};
  apply_presence_frequency(row, s.generated_counts(), 0.5f, 0.25f);
  // logit − count · frequency − [count > 0] · presence
  EXPECT_FLOAT_EQ(row[0], 1.0f);
  EXPECT_FLOAT_EQ(row[1], 1.0f - 2 * 0.25f - 0.5f);
  EXPECT_FLOAT_EQ(row[2], 1.0f - 0.25f - 0.5f);
  EXPECT_FLOAT_EQ(row[3], 1.0f);
}

TEST(MinTokens, StopIdsMaskedUntilEnoughTokens) {
  RequestParams p;
  p.sampling.temperature = 0.0f;
  p.stop.eos_token_ids = {3};
  p.stop.stop_token_ids = {1};
  p.stop.min_tokens = 2;
  Sampler sampler(p, {4, 4});
  const std::vector<TokenId> prompt = {0};
  SamplerState s = sampler.make_state(prompt);
  const std::vector<float> row = {0.0f, 5.0f, 1.0f, 9.0f};  // EOS (3) is the argmax, then stop id 1
  EXPECT_EQ(sampler.pick(row, s).token, 2);
  s.push(2);
  EXPECT_EQ(sampler.pick(row, s).token, 2);
  s.push(2);
  EXPECT_EQ(sampler.pick(row, s).token, 3);  // two generated: EOS allowed
}

TEST(MinTokens, IgnoreEosLeavesEosUnmasked) {
  RequestParams p;
  p.sampling.temperature = 0.0f;
  p.stop.eos_token_ids = {3};
  p.stop.ignore_eos = true;
  p.stop.min_tokens = 5;
  Sampler sampler(p, {4, 4});
  const std::vector<TokenId> prompt = {0};
  const std::vector<float> row = {0.0f, 5.0f, 1.0f, 9.0f};
  EXPECT_EQ(sampler.pick(row, sampler.make_state(prompt)).token, 3);
}

TEST(HistoryStages, DrafterSeesTheSameProcessedRowAsTheVerifier) {
  RequestParams p;
  p.sampling.temperature = 0.0f;
  p.sampling.repetition_penalty = 3.0f;
  p.sampling.logit_bias = {{2, -1.0f}};
  Sampler sampler(p, {6, 5});  // id 5 is padding
  const std::vector<TokenId> prompt = {4, 4};
  SamplerState s = sampler.make_state(prompt);
  std::vector<float> row = {1.0f, 0.5f, 2.4f, 0.0f, 3.0f, 100.0f};
  const TokenId verifier = sampler.pick(row, s).token;
  SamplerWorkspace ws;
  sampler.apply_history_processors(row, s, ws);
  EXPECT_EQ(row[5], -kInf);       // padding masked
  EXPECT_FLOAT_EQ(row[4], 1.0f);  // 3 / 3
  EXPECT_FLOAT_EQ(row[2], 1.4f);  // 2.4 − 1
  EXPECT_EQ(argmax_lowest_id(row), verifier);
  EXPECT_EQ(verifier, 2);
}

}  // namespace
}  // namespace specserve::sampling
