// The sampler end to end: greedy ties, padded ids, bad numbers, seeds, and the distribution of
// position-keyed samples (chi-square).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/error.h"
#include "fake_model.h"
#include "sampling/sampler.h"
#include "sampling_test_util.h"

namespace specserve::sampling {
namespace {

using testing::chi_square;
using testing::fake_logits;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

TEST(Sampler, GreedyTiesGoToTheLowestId) {
  Sampler s(greedy(), {6, 6});
  const std::vector<TokenId> prompt = {0};
  EXPECT_EQ(s.pick(std::vector<float>{1, 2, 5, 0, 5, 5}, s.make_state(prompt)).token, 2);
  EXPECT_EQ(argmax_lowest_id(std::vector<float>{-kInf, 7, 7}), 1);
}

TEST(Sampler, PaddedIdsNeverWin) {
  const std::vector<float> row = {1, 2, 3, 1000, 1000};
  const std::vector<TokenId> prompt = {0};
  Sampler g(greedy(), {5, 3});
  EXPECT_EQ(g.pick(row, g.make_state(prompt)).token, 2);
  RequestParams p;
  p.sampling.temperature = 2.0f;
  p.sampling.seed = 9;
  Sampler t(p, {5, 3});
  SamplerState st = t.make_state(prompt);
  for (int i = 0; i < 200; ++i) {
    const TokenId tok = t.pick(row, st).token;
    ASSERT_LT(tok, 3);
    st.push(tok);
  }
}

TEST(Sampler, NaNAndInfinityDoNotBreakThePick) {
  const std::vector<TokenId> prompt = {0};
  Sampler g(greedy(), {4, 4});
  EXPECT_EQ(g.pick(std::vector<float>{kNaN, 1, kNaN, 0}, g.make_state(prompt)).token, 1);
  EXPECT_EQ(g.pick(std::vector<float>{0, kInf, 1, kInf}, g.make_state(prompt)).token, 1);
  EXPECT_THROW(g.pick(std::vector<float>{kNaN, kNaN, -kInf, kNaN}, g.make_state(prompt)), Error);
  RequestParams p;
  p.sampling.seed = 1;
  Sampler t(p, {4, 4});
  EXPECT_EQ(t.pick(std::vector<float>{kNaN, 1, kNaN, -kInf}, t.make_state(prompt)).token, 1);
  EXPECT_THROW(t.pick(std::vector<float>{kNaN, kNaN, kNaN, kNaN}, t.make_state(prompt)), Error);
}

TEST(Sampler, RejectsBadConfigurationWithTheFieldName) {
  RequestParams p;
  p.sampling.logit_bias = {{10, 1.0f}};
  try {
    Sampler s(p, {12, 10});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("logit_bias"), std::string::npos) << e.what();
  }
  p = RequestParams{};
  p.sampling.top_p = 0.0f;
  EXPECT_THROW(Sampler(p, {12, 10}), Error);
  Sampler ok(RequestParams{}, {12, 10});
  const std::vector<TokenId> prompt = {0};
  EXPECT_THROW(ok.pick(std::vector<float>(11, 0.0f), ok.make_state(prompt)), Error);  // wrong row size
}

std::vector<TokenId> decode(const Sampler& s, int n, int64_t vocab = 64) {
  const std::vector<TokenId> prompt = {1, 2, 3};
  SamplerState st = s.make_state(prompt);
  std::vector<TokenId> out;
  for (int i = 0; i < n; ++i) {
    const TokenId t = s.pick(fake_logits(st.tokens(), vocab), st).token;
    st.push(t);
    out.push_back(t);
  }
  return out;
}

TEST(Sampler, SeededRunsReproduceAndSeedsMatter) {
  RequestParams p;
  p.sampling.temperature = 1.0f;
  p.sampling.seed = 1234;
  const auto a = decode(Sampler(p, {64, 64}), 100);
  EXPECT_EQ(a, decode(Sampler(p, {64, 64}), 100));
  p.sampling.seed = 1235;
  EXPECT_NE(a, decode(Sampler(p, {64, 64}), 100));
}

TEST(Sampler, UnseededRequestReportsASeedThatReplaysIt) {
  RequestParams p;
  p.sampling.temperature = 1.0f;
  Sampler first(p, {64, 64});
  const auto out = decode(first, 60);
  p.sampling.seed = first.seed();
  EXPECT_EQ(out, decode(Sampler(p, {64, 64}), 60));
}

// Samples `n` picks from one fixed row at consecutive positions and tests them against `expected`.
double sampled_chi_square(const Sampler& s, const std::vector<float>& row, const std::vector<double>& expected, int n) {
  const std::vector<TokenId> prompt = {0};
  SamplerState st = s.make_state(prompt);
  std::vector<int64_t> counts(row.size(), 0);
  SamplerWorkspace ws;
  for (int i = 0; i < n; ++i) {
    const TokenId t = s.pick(row, st, ws).token;
    ++counts[t];
    st.push(t);
  }
  std::vector<int64_t> obs;
  std::vector<double> exp;
  for (size_t i = 0; i < row.size(); ++i) {
    if (expected[i] > 0.0) {
      obs.push_back(counts[i]);
      exp.push_back(expected[i]);
    } else {
      EXPECT_EQ(counts[i], 0) << "token " << i << " has probability 0";
    }
  }
  return chi_square(obs, exp, n);
}

TEST(Sampler, PositionKeyedSamplesFollowTheDistribution) {
  const std::vector<double> p = {0.3, 0.2, 0.15, 0.1, 0.08, 0.07, 0.05, 0.03, 0.015, 0.005};
  std::vector<float> row;
  for (double x : p) row.push_back(float(std::log(x)));
  RequestParams rp;
  rp.sampling.seed = 77;
  Sampler s(rp, {10, 10});
  // df = 9: the 0.001 critical value is 27.88.
  EXPECT_LT(sampled_chi_square(s, row, p, 100000), 27.88);

  // With top-k 4 and T = 0.5 the target is the renormalised p^2 over the first four.
  rp.sampling.top_k = 4;
  rp.sampling.temperature = 0.5f;
  Sampler k4(rp, {10, 10});
  std::vector<double> q(10, 0.0);
  double z = 0.0;
  for (int i = 0; i < 4; ++i) z += p[i] * p[i];
  for (int i = 0; i < 4; ++i) q[i] = p[i] * p[i] / z;
  EXPECT_LT(sampled_chi_square(k4, row, q, 100000), 16.27);  // df = 3
  // A wrong target must fail the same test (the test has power).
  EXPECT_GT(sampled_chi_square(k4, row, std::vector<double>{0.4, 0.3, 0.2, 0.1, 0, 0, 0, 0, 0, 0}, 100000), 16.27);
}

TEST(Sampler, PickMatchesProcessedDistribution) {
  RequestParams rp;
  rp.sampling.seed = 5;
  rp.sampling.temperature = 0.8f;
  rp.sampling.top_p = 0.9f;
  rp.sampling.min_p = 0.02f;
  Sampler s(rp, {64, 60});
  const std::vector<TokenId> hist = {3, 4};
  const auto row = fake_logits(hist, 64);
  std::vector<float> probs(64);
  SamplerWorkspace ws;
  const std::vector<TokenId> prompt = {0};
  s.processed_distribution(row, s.make_state(prompt), ws, probs);
  std::vector<double> expected(probs.begin(), probs.end());
  const int df = int(std::count_if(probs.begin(), probs.end(), [](float x) { return x > 0; })) - 1;
  ASSERT_GE(df, 3);
  // Wilson–Hilferty approximation of the 0.001 critical value.
  const double crit = df * std::pow(1.0 - 2.0 / (9.0 * df) + 3.09 * std::sqrt(2.0 / (9.0 * df)), 3);
  EXPECT_LT(sampled_chi_square(s, row, expected, 100000), crit);
}

}  // namespace
}  // namespace specserve::sampling
