// DRY against worked examples derived from llama.cpp's documented behaviour (the comments in
// llama_sampler_dry_apply and the --dry-* documentation): a token that would extend a repeat of
// length L ≥ allowed_length loses multiplier · base^(L − allowed_length); sequence breakers cap L at
// the number of tokens after the most recent breaker; single-token breakers are never penalised.
#include <gtest/gtest.h>

#include <cmath>

#include "sampling/dry.h"

namespace specserve::sampling {
namespace {

constexpr TokenId a = 0, b = 1, c = 2, y = 3;

std::vector<float> run(const std::vector<TokenId>& history, DryParams p, int vocab = 10) {
  std::vector<float> row(vocab, 0.0f);
  DryScratch scratch;
  apply_dry(row, history, p, DryBreakers(p.sequence_breakers), scratch);
  return row;
}

DryParams params(float multiplier = 0.8f, float base = 1.75f, int allowed = 2) {
  DryParams p;
  p.multiplier = multiplier;
  p.base = base;
  p.allowed_length = allowed;
  return p;
}

TEST(Dry, LlamaCppDocumentedExample) {
  // "a b c c b c y a b c": the suffix "a b c" also ends at the first c (length 3), "b c" ends at the
  // third c (2), "c" at the second (1). Emitting the token after each would extend the repeat:
  // c → 3, y → 2, b → 1.
  const std::vector<TokenId> h = {a, b, c, c, b, c, y, a, b, c};
  const auto row = run(h, params());
  EXPECT_FLOAT_EQ(row[c], -0.8f * 1.75f);  // 3 − 2 = exponent 1
  EXPECT_FLOAT_EQ(row[y], -0.8f);          // exponent 0
  EXPECT_FLOAT_EQ(row[b], 0.0f);           // length 1 < allowed_length 2
  EXPECT_FLOAT_EQ(row[a], 0.0f);

  const auto row1 = run(h, params(0.8f, 1.75f, 1));
  EXPECT_FLOAT_EQ(row1[c], -0.8f * 1.75f * 1.75f);
  EXPECT_FLOAT_EQ(row1[y], -0.8f * 1.75f);
  EXPECT_FLOAT_EQ(row1[b], -0.8f);
}

TEST(Dry, NothingWhenTheWindowIsNotLongerThanAllowedLength) {
  EXPECT_EQ(run({1, 1}, params()), std::vector<float>(10, 0.0f));
  // Three equal tokens: the two-token suffix "1 1" also ends at index 1, followed by 1.
  const auto row = run({1, 1, 1}, params());
  EXPECT_FLOAT_EQ(row[1], -0.8f);
}

TEST(Dry, MultiTokenBreakerCapsTheRepeat) {
  // "9 8 1 2 5 9 8 1 2": the suffix "9 8 1 2" recurs, so 5 would extend a 4-token repeat.
  const std::vector<TokenId> h = {9, 8, 1, 2, 5, 9, 8, 1, 2};
  EXPECT_FLOAT_EQ(run(h, params())[5], -0.8f * 1.75f * 1.75f);
  // With the breaker [9, 8] the repeat may only count the 2 tokens after it.
  DryParams p = params();
  p.sequence_breakers = {{9, 8}};
  EXPECT_FLOAT_EQ(run(h, p)[5], -0.8f);
  // A breaker whose tail does not match is no breaker here.
  p.sequence_breakers = {{9, 7}};
  EXPECT_FLOAT_EQ(run(h, p)[5], -0.8f * 1.75f * 1.75f);
  // A single-token breaker in the middle caps it the same way.
  p.sequence_breakers = {{8}};
  EXPECT_FLOAT_EQ(run(h, p)[5], -0.8f);
}

TEST(Dry, BreakerAtTheEndDisablesThePenalty) {
  DryParams p = params();
  p.sequence_breakers = {{c}};
  EXPECT_EQ(run({a, b, c, c, b, c, y, a, b, c}, p), std::vector<float>(10, 0.0f));
}

TEST(Dry, SingleTokenBreakerIsNeverPenalised) {
  // "1 2 7 5 1 2": the suffix "1 2" recurs and was followed by 7.
  const std::vector<TokenId> h = {1, 2, 7, 5, 1, 2};
  EXPECT_FLOAT_EQ(run(h, params())[7], -0.8f);
  DryParams p = params();
  p.sequence_breakers = {{7}};  // 3 tokens after it: the repeat may still count 2
  EXPECT_FLOAT_EQ(run(h, p)[7], 0.0f);
}

TEST(Dry, PenaltyLastNLimitsTheWindow) {
  const std::vector<TokenId> h = {1, 2, 3, 4, 1, 2, 3};
  EXPECT_FLOAT_EQ(run(h, params())[4], -0.8f * 1.75f);
  DryParams p = params();
  p.penalty_last_n = 3;  // only "1 2 3": no earlier occurrence
  EXPECT_EQ(run(h, p), std::vector<float>(10, 0.0f));
  p.penalty_last_n = 0;  // off
  EXPECT_EQ(run(h, p), std::vector<float>(10, 0.0f));
}

TEST(Dry, LongestRepeatWinsForATokenFollowingSeveralRepeats) {
  // 5 follows both "1 2" (length 2) and "7 1 2" (length 3) occurrences of suffixes of "7 1 2".
  const std::vector<TokenId> h = {1, 2, 5, 7, 1, 2, 5, 0, 7, 1, 2};
  // The runs ending at index 1 ("1 2") and index 5 ("7 1 2") are both followed by 5.
  EXPECT_FLOAT_EQ(run(h, params())[5], -0.8f * 1.75f);
}

TEST(Dry, ExponentIsClampedSoThePenaltyStaysFinite) {
  std::vector<TokenId> h(400, 1);
  const auto row = run(h, params());
  EXPECT_TRUE(std::isfinite(row[1]));
  EXPECT_LT(row[1], -1e37f);
}

TEST(Dry, DisabledByZeroMultiplier) {
  EXPECT_EQ(run({a, b, c, c, b, c, y, a, b, c}, params(0.0f)), std::vector<float>(10, 0.0f));
}

}  // namespace
}  // namespace specserve::sampling
