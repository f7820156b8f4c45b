// Matmul: agreement with a double-precision reference, and row invariance: a row's output bits do not
// depend on how many rows are multiplied with it, where it sits, or how many threads run.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/matmul_kernels.h"
#include "backend/ops.h"
#include "core/error.h"
#include "core/thread_pool.h"

namespace specserve {
namespace {

Tensor random_tensor(DType dt, Shape shape, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, scale);
  Tensor f = Tensor::empty(DType::F32, shape);
  for (int64_t i = 0; i < f.numel(); ++i) f.as<float>()[i] = nd(rng);
  return dt == DType::F32 ? std::move(f) : from_f32(f, dt);
}

// The bf16-weight kernel of AVX512-BF16 machines rounds x to bf16 first; the reference does too.
std::vector<float> reference(const Tensor& x_in, const Tensor& w) {
  Tensor wf = to_f32(w);
  Tensor x = to_f32(x_in);
  if (w.dtype() == DType::BF16 && cpu::bf16_dot_kernel()) x = to_f32(from_f32(x, DType::BF16));
  int64_t M = x.shape()[0], K = x.shape()[1], N = w.shape()[0];
  std::vector<float> y(M * N);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += double(x.as<float>()[m * K + k]) * wf.as<float>()[n * K + k];
      y[m * N + n] = float(s);
    }
  return y;
}

class MatmulTest : public ::testing::TestWithParam<DType> {};

TEST_P(MatmulTest, MatchesReferenceOnOddShapes) {
  const Ops& ops = cpu_ops();
  for (auto [M, N, K] : {std::tuple{1, 13, 37}, {5, 70, 100}, {9, 33, 1000}, {4, 8, 8}, {3, 1, 17}}) {
    Tensor x = random_tensor(DType::F32, {M, K}, 1 + M);
    Tensor w = random_tensor(GetParam(), {N, K}, 2 + N);
    Tensor y = Tensor::empty(DType::F32, {M, N});
    ops.matmul(x, w, y);
    auto ref = reference(x, w);
    for (int64_t i = 0; i < M * N; ++i)
      ASSERT_NEAR(y.as<float>()[i], ref[i], 1e-4 * std::sqrt(double(K)) + 1e-5) << M << "x" << N << "x" << K;
  }
}

TEST_P(MatmulTest, RowResultIndependentOfBatchAndThreads) {
  const Ops& ops = cpu_ops();
  const int64_t N = 300, K = 515, M = 11;
  Tensor x = random_tensor(DType::F32, {M, K}, 7);
  Tensor w = random_tensor(GetParam(), {N, K}, 8);
  Tensor batch = Tensor::empty(DType::F32, {M, N});
  ops.matmul(x, w, batch);
  for (int64_t m = 0; m < M; ++m) {
    Tensor one = Tensor::empty(DType::F32, {1, N});
    ops.matmul(x.view().rows(m, m + 1), w, one);
    ASSERT_EQ(0, std::memcmp(one.as<float>(), batch.as<float>() + m * N, N * 4)) << "row " << m;
  }
  // Sub-batches of every size starting at every offset.
  for (int64_t b = 0; b < M; ++b)
    for (int64_t e = b + 1; e <= M; e += 3) {
      Tensor part = Tensor::empty(DType::F32, {e - b, N});
      ops.matmul(x.view().rows(b, e), w, part);
      ASSERT_EQ(0, std::memcmp(part.as<float>(), batch.as<float>() + b * N, (e - b) * N * 4));
    }
  ThreadPool::set_global_threads(1);
  Tensor single = Tensor::empty(DType::F32, {M, N});
  ops.matmul(x, w, single);
  ThreadPool::set_global_threads(3);
  Tensor three = Tensor::empty(DType::F32, {M, N});
  ops.matmul(x, w, three);
  ThreadPool::set_global_threads(0);
  EXPECT_EQ(0, std::memcmp(single.as<float>(), batch.as<float>(), M * N * 4));
  EXPECT_EQ(0, std::memcmp(three.as<float>(), batch.as<float>(), M * N * 4));
}

TEST_P(MatmulTest, MultiEqualsSeparate) {
  const Ops& ops = cpu_ops();
  Tensor x = random_tensor(DType::F32, {6, 64}, 3);
  Tensor w1 = random_tensor(GetParam(), {40, 64}, 4), w2 = random_tensor(GetParam(), {24, 64}, 5);
  Tensor a1 = Tensor::empty(DType::F32, {6, 40}), a2 = Tensor::empty(DType::F32, {6, 24});
  Tensor b1 = Tensor::empty(DType::F32, {6, 40}), b2 = Tensor::empty(DType::F32, {6, 24});
  TensorView ws[] = {w1, w2}, ys[] = {a1, a2};
  ops.matmul_multi(x, ws, ys);
  ops.matmul(x, w1, b1);
  ops.matmul(x, w2, b2);
  EXPECT_EQ(0, std::memcmp(a1.as<float>(), b1.as<float>(), a1.nbytes()));
  EXPECT_EQ(0, std::memcmp(a2.as<float>(), b2.as<float>(), a2.nbytes()));
}

TEST(Matmul, RejectsMismatchedShapes) {
  Tensor x = Tensor::zeros(DType::F32, {2, 8}), w = Tensor::zeros(DType::F32, {4, 9}),
         y = Tensor::zeros(DType::F32, {2, 4});
  EXPECT_THROW(cpu_ops().matmul(x, w, y), Error);
}

// The CPU backend has no free-order path: a MatmulOrder::Free scope (the DFlash drafter's) leaves its
// matmuls in the fixed order, bit for bit, and the scope restores what it found.
TEST_P(MatmulTest, FreeOrderScopeKeepsTheFixedOrderOnTheCpu) {
  const Ops& ops = cpu_ops();
  const int64_t M = 70, N = 40, K = 264;
  Tensor x = random_tensor(DType::F32, {M, K}, 3);
  Tensor w = random_tensor(GetParam(), {N, K}, 4);
  Tensor fixed = Tensor::empty(DType::F32, {M, N}), free = Tensor::empty(DType::F32, {M, N});
  ops.matmul(x, w, fixed);
  {
    const ScopedMatmulOrder order(ops, MatmulOrder::Free);
    ops.matmul(x, w, free);
  }
  EXPECT_EQ(std::memcmp(fixed.as<float>(), free.as<float>(), fixed.nbytes()), 0);
  EXPECT_EQ(ops.set_matmul_order(MatmulOrder::RowInvariant), MatmulOrder::RowInvariant);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, MatmulTest, ::testing::Values(DType::F32, DType::BF16),
                         [](const auto& i) { return std::string(dtype_name(i.param)); });

}  // namespace
}  // namespace specserve
