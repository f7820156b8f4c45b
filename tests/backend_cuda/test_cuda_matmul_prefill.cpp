// The prefill GEMM (Ops::matmul_prefill, cuda/matmul_prefill_sm90a.cu): against a double-precision
// reference of the same bf16 operands (a transposed, misaddressed or mis-swizzled operand would be off by
// O(1)), every element written and nothing beside y's columns; and the prefill rule of
// docs/DESIGN.md §1.2 bit for bit: a row's output does not depend on M, on the rows around it, on where
// the rows were cut into calls, or on sharing x with other weights (matmul_multi_prefill).
#include <cmath>
#include <iterator>
#include <vector>

#include "backend/cuda/kernels.h"
#include "backend/matmul_choice.h"
#include "cuda_test_util.h"

namespace specserve::cuda_test {
namespace {

struct PrefillCase {
  int64_t M, N, K;
};

// y [M, N] as columns [col, col + N) of rows `ld` floats apart in `buf`.
TensorView columns(const DeviceBuffer& buf, int64_t M, int64_t N, int64_t ld, int64_t col) {
  TensorView v = TensorView::contiguous(static_cast<float*>(buf.data()) + col, DType::F32, {M, N}, Device::CUDA);
  v.strides[0] = ld;
  return v;
}

float bf16_round(float v) {
  uint16_t b;
  convert_from_f32(&v, DType::BF16, &b, 1);
  float r;
  convert_to_f32(&b, DType::BF16, &r, 1);
  return r;
}

bool takes_prefill(int64_t M, int64_t N, int64_t K) {
  if (!cuda::kernels::wgmma_available()) return false;
  MatmulWeight w;
  w.N = N;
  w.ldw = K;
  w.ldy = N;
  return choose_matmul(MatmulBackend::Cuda, MatmulOrder::Prefill, M, K, w) == MatmulKernel::Prefill;
}

class PrefillMatmul : public Gpu, public ::testing::WithParamInterface<PrefillCase> {};

TEST_P(PrefillMatmul, AgreesWithADoubleReferenceOfTheBf16Operands) {
  const auto [M, N, K] = GetParam();
  if (!cuda::kernels::wgmma_available()) GTEST_SKIP() << "not a compute capability 9.0 device";
  ASSERT_TRUE(takes_prefill(M, N, K));
  const auto xh = randn(size_t(M * K), 1), wh = randn(size_t(N * K), 2, 0.05f);
  const auto wb = to_bf16(wh);
  const DeviceBuffer x = DeviceBuffer::from(xh), w = DeviceBuffer::from(wb);
  // y is columns [3, 3 + N) of rows N + 5 wide: the odd offset takes the kernel's one-float stores.
  const int64_t ld = N + 5;
  const DeviceBuffer y = poisoned(size_t(M * ld));
  cuda_ops().matmul_prefill(dev_view(x, DType::F32, {M, K}), dev_view(w, DType::BF16, {N, K}), columns(y, M, N, ld, 3));
  const auto got = download(y, size_t(M * ld));
  std::vector<float> xr(xh.size()), wr(wh.size());
  for (size_t i = 0; i < xh.size(); ++i) xr[i] = bf16_round(xh[i]);
  convert_to_f32(wb.data(), DType::BF16, wr.data(), wr.size());
  double worst = 0;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t c = 0; c < ld; ++c) {
      const float v = got[size_t(m * ld + c)];
      if (c < 3 || c >= 3 + N) {
        ASSERT_TRUE(std::isnan(v)) << "wrote outside y at row " << m << " column " << c;
        continue;
      }
      const int64_t n = c - 3;
      double ref = 0, mag = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double p = double(xr[size_t(m * K + k)]) * double(wr[size_t(n * K + k)]);
        ref += p;
        mag += std::fabs(p);
      }
      ASSERT_TRUE(std::isfinite(v)) << "row " << m << " column " << n << " not written";
      worst = std::max(worst, std::fabs(v - ref) / std::max(mag, 1e-30));
    }
  EXPECT_LT(worst, 1e-5) << "M " << M << " N " << N << " K " << K;
}

// The prefill rule: every row of one [M, K] call equals the same row computed in calls cut elsewhere, at
// another offset among other rows, and with x shared by a second weight — bit for bit.
TEST_P(PrefillMatmul, ARowsBitsDependOnItsRowOnly) {
  const auto [M, N, K] = GetParam();
  if (!cuda::kernels::wgmma_available()) GTEST_SKIP() << "not a compute capability 9.0 device";
  const auto xh = randn(size_t(M * K), 3);
  const DeviceBuffer x = DeviceBuffer::from(xh), w = DeviceBuffer::from(to_bf16(randn(size_t(N * K), 4, 0.05f)));
  const DeviceBuffer w2 = DeviceBuffer::from(to_bf16(randn(size_t(300 * K), 5, 0.05f)));
  const TensorView W = dev_view(w, DType::BF16, {N, K});
  const DeviceBuffer whole = poisoned(size_t(M * N));
  cuda_ops().matmul_prefill(dev_view(x, DType::F32, {M, K}), W, dev_view(whole, DType::F32, {M, N}));
  const auto ref = download(whole, size_t(M * N));

  // Cut into calls of 1, 7, then the rest (each call's x a view of its rows).
  const DeviceBuffer cut = poisoned(size_t(M * N));
  const TensorView X = dev_view(x, DType::F32, {M, K}), Y = dev_view(cut, DType::F32, {M, N});
  for (int64_t b = 0, step = 1; b < M; step = step == 1 ? 7 : M) {
    const int64_t e = std::min(M, b + step);
    cuda_ops().matmul_prefill(X.rows(b, e), W, Y.rows(b, e));
    b = e;
  }
  ASSERT_TRUE(bit_equal(download(cut, size_t(M * N)).data(), ref.data(), ref.size())) << "chunked";

  // The same rows at offset 77 of a 77 + M + 200-row batch of other rows.
  const int64_t big = 77 + M + 200;
  auto xb = randn(size_t(big * K), 6);
  std::copy(xh.begin(), xh.end(), xb.begin() + 77 * K);
  const DeviceBuffer xbig = DeviceBuffer::from(xb), ybig = poisoned(size_t(big * N));
  cuda_ops().matmul_prefill(dev_view(xbig, DType::F32, {big, K}), W, dev_view(ybig, DType::F32, {big, N}));
  const auto got = download(ybig, size_t(big * N));
  ASSERT_TRUE(bit_equal(got.data() + 77 * N, ref.data(), ref.size())) << "beside other rows";

  // matmul_multi_prefill with a second weight: the first part's bits are its lone call's.
  const DeviceBuffer ya = poisoned(size_t(M * N)), yb = poisoned(size_t(M * 300));
  const TensorView ws[] = {W, dev_view(w2, DType::BF16, {300, K})};
  const TensorView ys[] = {dev_view(ya, DType::F32, {M, N}), dev_view(yb, DType::F32, {M, 300})};
  cuda_ops().matmul_multi_prefill(X, ws, ys);
  ASSERT_TRUE(bit_equal(download(ya, size_t(M * N)).data(), ref.data(), ref.size())) << "multi";
  const DeviceBuffer yb1 = poisoned(size_t(M * 300));
  cuda_ops().matmul_prefill(X, ws[1], dev_view(yb1, DType::F32, {M, 300}));
  ASSERT_TRUE(bit_equal(download(yb, size_t(M * 300)).data(), download(yb1, size_t(M * 300)).data(), size_t(M * 300)));

  // Six weights sharing x (a launch takes four: two launches, the small weights' tiles after the large
  // ones'): every part's bits are its lone call's.
  const int64_t widths[] = {N, 48, 300, 1, 520, 48};
  std::vector<DeviceBuffer> wbufs, ybufs;
  std::vector<TensorView> wv, yv;
  for (size_t i = 0; i < std::size(widths); ++i) {
    wbufs.push_back(DeviceBuffer::from(to_bf16(randn(size_t(widths[i] * K), 40 + uint32_t(i), 0.05f))));
    ybufs.push_back(poisoned(size_t(M * widths[i])));
  }
  for (size_t i = 0; i < std::size(widths); ++i) {
    wv.push_back(dev_view(wbufs[i], DType::BF16, {widths[i], K}));
    yv.push_back(dev_view(ybufs[i], DType::F32, {M, widths[i]}));
  }
  cuda_ops().matmul_multi_prefill(X, wv, yv);
  for (size_t i = 0; i < std::size(widths); ++i) {
    const size_t n = size_t(M * widths[i]);
    const DeviceBuffer alone = poisoned(n);
    cuda_ops().matmul_prefill(X, wv[i], dev_view(alone, DType::F32, {M, widths[i]}));
    ASSERT_TRUE(bit_equal(download(ybufs[i], n).data(), download(alone, n).data(), n)) << "part " << i << " of six";
  }
}

// Shapes: one row; a partial M tile and a partial 256-column tile; K not a multiple of the 64-wide stage
// (the TMA box reads zeros past K); several persistent rounds (more tiles than multiprocessors).
INSTANTIATE_TEST_SUITE_P(Shapes, PrefillMatmul,
                         ::testing::Values(PrefillCase{1, 256, 512}, PrefillCase{37, 200, 72},
                                           PrefillCase{130, 300, 1000}, PrefillCase{300, 1000, 1024},
                                           PrefillCase{700, 4096, 256}, PrefillCase{1024, 512, 3072}));

// f32 weights (the parity path) and weights the TMA cannot address run the row-invariant kernels: still
// correct, still a row's own bits.
TEST_F(Gpu, PrefillMatmulOfF32WeightsRunsTheRowInvariantKernel) {
  const int64_t M = 40, N = 64, K = 96;
  MatmulWeight f32w;
  f32w.N = N;
  f32w.bf16 = false;
  f32w.ldw = K;
  EXPECT_EQ(choose_matmul(MatmulBackend::Cuda, MatmulOrder::Prefill, M, K, f32w), MatmulKernel::CudaCoreF32);
  const DeviceBuffer x = DeviceBuffer::from(randn(size_t(M * K), 7)), w = DeviceBuffer::from(randn(size_t(N * K), 8));
  const DeviceBuffer a = poisoned(size_t(M * N)), b = poisoned(size_t(M * N));
  const TensorView X = dev_view(x, DType::F32, {M, K}), W = dev_view(w, DType::F32, {N, K});
  cuda_ops().matmul(X, W, dev_view(a, DType::F32, {M, N}));
  cuda_ops().matmul_prefill(X, W, dev_view(b, DType::F32, {M, N}));
  ASSERT_TRUE(bit_equal(download(a, size_t(M * N)).data(), download(b, size_t(M * N)).data(), size_t(M * N)));
}

}  // namespace
}  // namespace specserve::cuda_test
