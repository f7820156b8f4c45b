// cpu_ops().argmax: the sampler's greedy pick (lowest index of the maximum, NaN as -inf, +inf as
// FLT_MAX, -1 without a finite entry) over the first n columns of each row.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <random>
#include <vector>

#include "backend/ops.h"
#include "core/error.h"

namespace specserve {
namespace {

std::vector<int32_t> run(std::vector<float> x, int64_t rows, int64_t cols, int64_t n) {
  std::vector<int32_t> out(size_t(rows), 7);
  cpu_ops().argmax(TensorView::contiguous(x.data(), DType::F32, {rows, cols}), n, out);
  return out;
}

TEST(Argmax, TiesGoToTheLowestIndex) { EXPECT_EQ(run({1, 3, 2, 3, 3}, 1, 5, 5), (std::vector<int32_t>{1})); }

TEST(Argmax, SanitisesLikeTheSampler) {
  const float nan = NAN, inf = INFINITY;
  // NaN never wins; +inf counts as FLT_MAX, so it ties with a real FLT_MAX and the lower index wins.
  EXPECT_EQ(run({nan, 1, nan, 0}, 1, 4, 4), (std::vector<int32_t>{1}));
  EXPECT_EQ(run({FLT_MAX, 0, inf}, 1, 3, 3), (std::vector<int32_t>{0}));
  EXPECT_EQ(run({0, inf, FLT_MAX}, 1, 3, 3), (std::vector<int32_t>{1}));
  EXPECT_EQ(run({-inf, -inf, nan}, 1, 3, 3), (std::vector<int32_t>{-1}));
}

TEST(Argmax, OnlyTheFirstNColumnsCount) {
  // Each row's maximum sits in a padded column past n.
  EXPECT_EQ(run({0, 2, 1, 9, 5, 4, 1, 6}, 2, 4, 3), (std::vector<int32_t>{1, 0}));
}

TEST(Argmax, ManyRowsAgreeWithAScalarScan) {
  const int64_t R = 64, V = 5000;
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  std::vector<float> x(size_t(R * V));
  for (auto& v : x) v = std::round(nd(rng) * 4) / 4;  // coarse values: plenty of ties
  const auto got = run(x, R, V, V);
  for (int64_t r = 0; r < R; ++r) {
    int32_t best = 0;
    for (int64_t i = 1; i < V; ++i)
      if (x[size_t(r * V + i)] > x[size_t(r * V + best)]) best = int32_t(i);
    EXPECT_EQ(got[size_t(r)], best) << "row " << r;
  }
}

TEST(Argmax, RejectsBadOperands) {
  std::vector<float> x(6);
  std::vector<int32_t> out(2);
  const TensorView v = TensorView::contiguous(x.data(), DType::F32, {2, 3});
  EXPECT_THROW(cpu_ops().argmax(v, 4, out), Error);
  EXPECT_THROW(cpu_ops().argmax(v, 0, out), Error);
  std::vector<int32_t> one(1);
  EXPECT_THROW(cpu_ops().argmax(v, 3, one), Error);
}

}  // namespace
}  // namespace specserve
