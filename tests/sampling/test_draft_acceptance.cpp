// Sampled-draft mode arithmetic: accepting d ~ q with min(1, p/q) and resampling the residual
// norm(max(p − q, 0)) on rejection yields exactly p (chi-square), with position-keyed uniforms.
#include <gtest/gtest.h>

#include "core/error.h"
#include "fake_model.h"
#include "sampling/draft_acceptance.h"
#include "sampling/philox.h"

namespace specserve::sampling {
namespace {

TEST(DraftAcceptance, SampleFromIsInverseCdfInIdOrder) {
  const std::vector<float> p = {0.25f, 0.0f, 0.5f, 0.25f};
  EXPECT_EQ(sample_from(p, 0.0), 0);
  EXPECT_EQ(sample_from(p, 0.2499), 0);
  EXPECT_EQ(sample_from(p, 0.25), 2);  // cumulative must exceed u·total
  EXPECT_EQ(sample_from(p, 0.7499), 2);
  EXPECT_EQ(sample_from(p, 0.9999999), 3);
  EXPECT_THROW(sample_from(std::vector<float>{0, 0}, 0.5), Error);
}

TEST(DraftAcceptance, AcceptRule) {
  EXPECT_TRUE(accept_draft(0.5f, 0.25f, 0.99));  // p ≥ q: always
  EXPECT_TRUE(accept_draft(0.2f, 0.4f, 0.49));   // u < p/q = 0.5
  EXPECT_FALSE(accept_draft(0.2f, 0.4f, 0.5));
  EXPECT_FALSE(accept_draft(0.0f, 0.4f, 0.0));  // p(d) = 0: never
}

TEST(DraftAcceptance, ResidualExcludesWhereQCoversP) {
  const std::vector<float> p = {0.5f, 0.3f, 0.2f};
  const std::vector<float> q = {0.7f, 0.1f, 0.2f};  // residual: only id 1
  for (double u : {0.0, 0.5, 0.999}) EXPECT_EQ(sample_residual(p, q, u), 1);
  EXPECT_EQ(sample_residual(p, p, 0.6), sample_from(p, 0.6));  // zero residual: falls back to p
}

TEST(DraftAcceptance, SpeculativeSamplingReproducesTheTarget) {
  const std::vector<float> p = {0.05f, 0.4f, 0.3f, 0.1f, 0.15f};
  const std::vector<float> q = {0.3f, 0.1f, 0.3f, 0.25f, 0.05f};
  const uint64_t seed = 2024;
  const int n = 200000;
  std::vector<int64_t> counts(p.size(), 0);
  int64_t accepted = 0;
  for (int pos = 0; pos < n; ++pos) {
    const TokenId d = sample_from(q, position_uniform(seed, pos, RandomStream::kDraft));
    TokenId out = d;
    if (accept_draft(p[d], q[d], position_uniform(seed, pos, RandomStream::kAccept))) {
      ++accepted;
    } else {
      out = sample_residual(p, q, position_uniform(seed, pos, RandomStream::kResidual));
    }
    ++counts[out];
  }
  const std::vector<double> expected(p.begin(), p.end());
  EXPECT_LT(testing::chi_square(counts, expected, n), 18.47);  // df = 4, p = 0.001
  // Acceptance rate Σ min(p, q) = 0.05 + 0.1 + 0.3 + 0.1 + 0.05 = 0.6.
  EXPECT_NEAR(double(accepted) / n, 0.6, 0.005);
}

}  // namespace
}  // namespace specserve::sampling
