// The vectorised row loops: exact agreement between vector lanes and the scalar tail, accuracy of
// the exp, and the blocked inverse CDF against a plain sequential one.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "sampling/row_kernels.h"
#include "sampling_test_util.h"

namespace specserve::sampling {
namespace {

TEST(RowKernels, ExpIsAccurateAndLaneIndependent) {
  for (float x = -87.0f; x <= 0.0f; x += 0.0137f) {
    const float e = exp_nonpositive(x);
    ASSERT_NEAR(e, std::exp(x), 3e-7f * std::exp(x)) << x;
  }
  EXPECT_EQ(exp_nonpositive(0.0f), 1.0f);
  EXPECT_EQ(exp_nonpositive(-90.0f), 0.0f);
  EXPECT_EQ(exp_nonpositive(-kInf), 0.0f);
  // A row of odd length: vector lanes and the scalar tail give the same bits as the scalar call.
  std::mt19937 rng(2);
  std::normal_distribution<float> d(0.0f, 5.0f);
  std::vector<float> row(1003);
  for (auto& x : row) x = d(rng);
  row[17] = -kInf;
  const float max = row_max(row);
  std::vector<float> w(row.size());
  std::vector<double> blocks;
  const double total = exp_weights(row, max, w, blocks);
  double check = 0.0;
  for (size_t i = 0; i < row.size(); ++i) {
    ASSERT_EQ(w[i], exp_nonpositive(row[i] - max)) << i;
    check += w[i];
  }
  EXPECT_EQ(w[17], 0.0f);
  EXPECT_EQ(blocks.size(), (row.size() + kWeightBlock - 1) / kWeightBlock);
  EXPECT_NEAR(total, check, 1e-12 * check);
}

TEST(RowKernels, SanitizeMaxAndFirstIndex) {
  std::vector<float> row(21, 1.0f);
  row[3] = std::numeric_limits<float>::quiet_NaN();
  row[9] = kInf;
  row[20] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(sanitize_row(row), std::numeric_limits<float>::max());
  EXPECT_EQ(row[3], -kInf);
  EXPECT_EQ(row[20], -kInf);
  EXPECT_EQ(row[9], std::numeric_limits<float>::max());
  std::vector<float> with_nan = {1, 5, std::numeric_limits<float>::quiet_NaN(), 5, 2, 2, 2, 2, 2, 2, 9};
  EXPECT_EQ(row_max(with_nan), 9.0f);
  with_nan[10] = 0;
  EXPECT_EQ(row_max(with_nan), 5.0f);
  EXPECT_EQ(first_index_of(with_nan, 5.0f), 1u);
  EXPECT_EQ(first_index_of(with_nan, 7.0f), with_nan.size());
}

TEST(RowKernels, DivideIsATrueDivision) {
  std::vector<float> row = {1.0f, -3.0f, -kInf, 0.7f, 2.5f, 1e-3f, 9.0f, 11.0f, -2.0f, 0.1f};
  const std::vector<float> before = row;
  divide_row(row, 0.7f);
  for (size_t i = 0; i < row.size(); ++i) EXPECT_EQ(row[i], before[i] / 0.7f) << i;
}

TEST(RowKernels, BlockedInverseCdfMatchesSequential) {
  std::mt19937 rng(8);
  std::vector<float> w(3000);
  for (auto& x : w) x = (rng() % 4 == 0) ? 0.0f : float(rng() % 1000) / 1000.0f;
  std::vector<double> blocks((w.size() + kWeightBlock - 1) / kWeightBlock, 0.0);
  double total = 0.0;
  for (size_t i = 0; i < w.size(); ++i) blocks[i / kWeightBlock] += w[i];
  for (double b : blocks) total += b;
  for (int t = 0; t < 500; ++t) {
    const double target = double(rng() % 1000000) / 1000000.0 * total;
    double cum = 0.0;
    size_t expected = w.size();
    for (size_t i = 0; i < w.size(); ++i) {
      cum += w[i];
      if (w[i] > 0 && cum > target) {
        expected = i;
        break;
      }
    }
    ASSERT_EQ(inverse_cdf_blocked(w, blocks, target), expected) << target;
  }
}

}  // namespace
}  // namespace specserve::sampling
