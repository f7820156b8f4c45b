// The split-K kernel for 17-64 rows (backend/cuda/matmul_tensor_core_mid.cu) called directly: it takes
// the calls it fits (and only those), every row it computes equals the row computed alone (M = 1, the gemv
// kernel) in the last bit, and one launch over two weights equals the two launches. The launcher's default
// path reaches it too (test_cuda_matmul_tensor_core.cpp's row invariance at 17-64 rows); these tests fail
// if the dispatch stops reaching it or its bits drift.
#include <cmath>
#include <vector>

#include "backend/cuda/cuda_memory.h"
#include "backend/cuda/kernels.h"
#include "cuda_test_util.h"

namespace specserve::cuda_test {
namespace {

namespace k = cuda::kernels;

struct Operands {
  int64_t N, K;
  std::vector<float> x;
  DeviceBuffer dx, dw;
  Operands(int64_t rows, int64_t n, int64_t kk, uint32_t w_seed = 0)
      : N(n),
        K(kk),
        x(randn(size_t(rows * kk), uint32_t(11 + n + kk))),
        dx(DeviceBuffer::from(x)),
        dw(DeviceBuffer::from(to_bf16(randn(size_t(n * kk), uint32_t(13 + n) + w_seed, 0.05f)))) {}
  k::MatmulArgs args(int64_t first, int64_t M, float* y, const void* w = nullptr, int64_t ldw = 0) const {
    return k::MatmulArgs{.x = dx.as<const float>() + first * K,
                         .ldx = K,
                         .w = w != nullptr ? w : dw.data(),
                         .w_bf16 = true,
                         .ldw = ldw != 0 ? ldw : K,
                         .y = y,
                         .ldy = N,
                         .M = M,
                         .N = N,
                         .K = K};
  }
  // Row m computed alone through the launcher (one row: the gemv kernel).
  std::vector<float> alone(int64_t m) const {
    DeviceBuffer y = poisoned(size_t(N));
    const TensorView X = dev_view(dx, DType::F32, {int64_t(x.size()) / K, K});
    cuda_ops().matmul(X.rows(m, m + 1), dev_view(dw, DType::BF16, {N, K}), dev_view(y, DType::F32, {1, N}));
    return download(y, size_t(N));
  }
};

TEST_F(Gpu, MidKernelRowsEqualTheirRowsAlone) {
  // S = 8 (q/o_proj), S = 4, S = 8 with a short last slice and K % 16 == 8, S = 8 with long slices.
  for (auto [N, K] : {std::pair<int64_t, int64_t>{4096, 4096}, {512, 1024}, {1000, 4104}, {64, 12288}}) {
    const Operands o(64 + 9, N, K);
    std::vector<std::vector<float>> rows;
    for (int64_t m = 0; m < 64 + 9; ++m) rows.push_back(o.alone(m));
    for (int64_t M : {17, 24, 32, 33, 48, 64}) {
      const int64_t first = M % 9;
      DeviceBuffer y = poisoned(size_t(M * N));
      const k::MatmulArgs a = o.args(first, M, y.as<float>());
      const bool ran = k::matmul_bf16_mid(&a, 1, cuda::cuda_stream());
      // Up to 32 rows it always runs; above, only when its launch fills its waves (the default mode).
      if (M <= 32) EXPECT_TRUE(ran) << "M " << M << ", N " << N << ", K " << K;
      if (!ran) continue;
      const auto got = download(y, size_t(M * N));
      for (int64_t m = 0; m < M; ++m)
        ASSERT_TRUE(bit_equal(got.data() + m * N, rows[size_t(first + m)].data(), size_t(N)))
            << "row " << first + m << " at " << m << " of M " << M << ", N " << N << ", K " << K;
    }
  }
}

TEST_F(Gpu, MidKernelDeclinesWhatItDoesNotFit) {
  const Operands o(80, 512, 1024);  // S = 4
  DeviceBuffer y = poisoned(size_t(80 * 512));
  for (int64_t M : {1, 16, 65}) {
    const k::MatmulArgs a = o.args(0, M, y.as<float>());
    EXPECT_FALSE(k::matmul_bf16_mid(&a, 1, cuda::cuda_stream())) << "M " << M;
  }
  // Weights one element past an aligned start, pitch K + 3: no 16-byte loads.
  std::vector<uint16_t> w2(size_t(512 * (1024 + 3) + 1));
  DeviceBuffer dw2 = DeviceBuffer::from(w2);
  const k::MatmulArgs mis = o.args(0, 24, y.as<float>(), dw2.as<const uint16_t>() + 1, 1024 + 3);
  EXPECT_FALSE(k::matmul_bf16_mid(&mis, 1, cuda::cuda_stream()));
  const Operands odd_k(24, 512, 1001), wide(24, 24576, 1024);  // K % 8 != 0; S = 2
  DeviceBuffer y2 = poisoned(size_t(24 * 24576));
  for (const Operands* op : {&odd_k, &wide}) {
    const k::MatmulArgs a = op->args(0, 24, y2.as<float>());
    EXPECT_FALSE(k::matmul_bf16_mid(&a, 1, cuda::cuda_stream())) << "N " << op->N << ", K " << op->K;
  }
  // Nothing was written.
  for (float v : download(y, size_t(80 * 512))) ASSERT_TRUE(std::isnan(v));
}

TEST_F(Gpu, MidKernelTwoWeightsEqualTwoLaunches) {
  const Operands gate(32, 512, 1024), up(32, 512, 1024, 1);  // up's x is gate's (unused); S = 4
  for (int64_t M : {17, 32}) {
    DeviceBuffer y1 = poisoned(size_t(M * 512)), y2 = poisoned(size_t(M * 512)), z1 = poisoned(size_t(M * 512)),
                 z2 = poisoned(size_t(M * 512));
    k::MatmulArgs both[2] = {gate.args(0, M, y1.as<float>()), gate.args(0, M, y2.as<float>(), up.dw.data())};
    ASSERT_TRUE(k::matmul_bf16_mid(both, 2, cuda::cuda_stream()));
    const k::MatmulArgs a1 = gate.args(0, M, z1.as<float>()), a2 = gate.args(0, M, z2.as<float>(), up.dw.data());
    ASSERT_TRUE(k::matmul_bf16_mid(&a1, 1, cuda::cuda_stream()));
    ASSERT_TRUE(k::matmul_bf16_mid(&a2, 1, cuda::cuda_stream()));
    const auto g1 = download(y1, size_t(M * 512)), g2 = download(y2, size_t(M * 512));
    EXPECT_TRUE(bit_equal(g1.data(), download(z1, size_t(M * 512)).data(), g1.size())) << "M " << M;
    EXPECT_TRUE(bit_equal(g2.data(), download(z2, size_t(M * 512)).data(), g2.size())) << "M " << M;
  }
}

}  // namespace
}  // namespace specserve::cuda_test
