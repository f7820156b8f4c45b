// The in-process collective (backend/collective.h): the fixed rank order of the sum, row invariance, the
// column gather, and aliased outputs.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "backend/collective.h"
#include "core/error.h"

namespace specserve {
namespace {

Tensor random_rows(int64_t rows, int64_t cols, uint32_t seed) {
  Tensor t = Tensor::empty(DType::F32, {rows, cols});
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1e3f, 1e3f);
  for (int64_t i = 0; i < t.numel(); ++i) t.as<float>()[i] = d(rng) * (i % 7 == 0 ? 1e-6f : 1.0f);
  return t;
}

TEST(Collective, SumsInRankOrder) {
  const int n = 4;
  std::vector<Tensor> parts;
  for (int r = 0; r < n; ++r) parts.push_back(random_rows(3, 37, 10 + r));
  // Values where the order of additions matters: 1 + 1e8 − 1e8 + 1 gives 1 in rank order, not 2 or 0.
  const float tricky[] = {1.0f, 1e8f, -1e8f, 1.0f};
  for (int r = 0; r < n; ++r) parts[r].as<float>()[0] = tricky[r];
  std::vector<TensorView> views(parts.begin(), parts.end());
  Tensor out = Tensor::empty(DType::F32, {3, 37});
  const std::vector<TensorView> outs(n, out.view());
  in_process_collective(n)->all_reduce_sum(views, outs);
  for (int64_t i = 0; i < out.numel(); ++i) {
    float want = parts[0].as<float>()[i];
    for (int r = 1; r < n; ++r) want = want + parts[r].as<float>()[i];
    ASSERT_EQ(std::memcmp(&want, out.as<float>() + i, 4), 0) << "element " << i;
  }
  EXPECT_EQ(out.as<float>()[0], 1.0f);
}

TEST(Collective, RowBitsDoNotDependOnTheRowCount) {
  const int n = 2;
  std::vector<Tensor> parts;
  for (int r = 0; r < n; ++r) parts.push_back(random_rows(16, 64, 20 + r));
  std::vector<TensorView> all(parts.begin(), parts.end());
  Tensor sixteen = Tensor::empty(DType::F32, {16, 64});
  in_process_collective(n)->all_reduce_sum(all, std::vector<TensorView>(n, sixteen.view()));
  for (int64_t row = 0; row < 16; ++row) {
    std::vector<TensorView> one;
    for (const Tensor& p : parts) one.push_back(p.view().rows(row, row + 1));
    Tensor single = Tensor::empty(DType::F32, {1, 64});
    in_process_collective(n)->all_reduce_sum(one, std::vector<TensorView>(n, single.view()));
    EXPECT_EQ(std::memcmp(single.as<float>(), sixteen.as<float>() + row * 64, 64 * 4), 0) << "row " << row;
  }
}

TEST(Collective, DistinctOutputsAllGetTheSum) {
  Tensor a = random_rows(2, 5, 1), b = random_rows(2, 5, 2), x = Tensor::empty(DType::F32, {2, 5}),
         y = Tensor::empty(DType::F32, {2, 5});
  const TensorView parts[] = {a, b}, outs[] = {x, y};
  in_process_collective(2)->all_reduce_sum(parts, outs);
  EXPECT_EQ(std::memcmp(x.as<float>(), y.as<float>(), x.nbytes()), 0);
  EXPECT_EQ(x.as<float>()[3], a.as<float>()[3] + b.as<float>()[3]);
}

TEST(Collective, GathersColumnBlocksInRankOrder) {
  Tensor a = random_rows(3, 2, 1), b = random_rows(3, 3, 2), out = Tensor::empty(DType::F32, {3, 5});
  const TensorView parts[] = {a, b}, outs[] = {out, out};
  in_process_collective(2)->all_gather_columns(parts, outs);
  for (int64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(out.as<float>()[i * 5 + 1], a.as<float>()[i * 2 + 1]);
    EXPECT_EQ(out.as<float>()[i * 5 + 2], b.as<float>()[i * 3 + 0]);
    EXPECT_EQ(out.as<float>()[i * 5 + 4], b.as<float>()[i * 3 + 2]);
  }
}

TEST(Collective, RefusesMismatchedArguments) {
  Tensor a = random_rows(2, 5, 1), b = random_rows(2, 4, 2), out = Tensor::empty(DType::F32, {2, 5});
  const TensorView parts[] = {a, b}, outs[] = {out, out};
  EXPECT_THROW(in_process_collective(2)->all_reduce_sum(parts, outs), Error);
  EXPECT_THROW(in_process_collective(3)->all_reduce_sum(parts, outs), Error);
  EXPECT_THROW(in_process_collective(2)->all_gather_columns(parts, outs), Error);  // 9 columns into 5
  EXPECT_THROW(in_process_collective(0), Error);
}

}  // namespace
}  // namespace specserve
