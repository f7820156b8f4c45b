// Philox-4x32-10 against the Random123 known-answer vectors (kat_vectors), and the properties the
// position-keyed uniform must have.
#include <gtest/gtest.h>

#include <set>

#include "sampling/philox.h"

namespace specserve::sampling {
namespace {

TEST(Philox, KnownAnswerVectors) {
  // Random123 kat_vectors, "philox4x32 10": counter[4] key[2] → output[4].
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}), (PhiloxCounter{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
            (PhiloxCounter{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (PhiloxCounter{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(Philox, UniformIsAPureFunctionOfSeedPositionStream) {
  const double u = position_uniform(42, 1000, RandomStream::kSample);
  EXPECT_EQ(u, position_uniform(42, 1000, RandomStream::kSample));
  EXPECT_NE(u, position_uniform(43, 1000, RandomStream::kSample));
  EXPECT_NE(u, position_uniform(42, 1001, RandomStream::kSample));
  // The streams of one position differ, so sampled-draft mode never reuses the pick's number.
  std::set<double> streams;
  for (auto s : {RandomStream::kSample, RandomStream::kDraft, RandomStream::kAccept, RandomStream::kResidual}) {
    streams.insert(position_uniform(42, 1000, s));
  }
  EXPECT_EQ(streams.size(), 4u);
  // Positions beyond 2^32 use the counter's high word.
  EXPECT_NE(position_uniform(42, 5, RandomStream::kSample),
            position_uniform(42, 5 + (uint64_t{1} << 32), RandomStream::kSample));
}

TEST(Philox, UniformRangeAndMean) {
  double sum = 0.0;
  const int n = 200000;
  for (int p = 0; p < n; ++p) {
    const double u = position_uniform(7, p, RandomStream::kSample);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  // Mean of U(0,1) has standard deviation sqrt(1/12/n) ≈ 0.00065; 6 sigma.
  EXPECT_NEAR(sum / n, 0.5, 0.004);
}

TEST(Philox, RandomSeedsDifferAndFitInADouble) {
  const uint64_t a = random_seed(), b = random_seed();
  EXPECT_NE(a, b);
  EXPECT_LT(a, uint64_t{1} << 53);
  EXPECT_LT(b, uint64_t{1} << 53);
}

}  // namespace
}  // namespace specserve::sampling
