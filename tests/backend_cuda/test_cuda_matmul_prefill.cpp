// The prefill GEMM (Ops::matmul_prefill, cuda/matmul_prefill_sm90a.cu): against a double-precision
// reference of the same bf16 operands (a transposed, misaddressed or mis-swizzled operand would be off by
// O(1)), every element written and nothing beside y's columns; and the prefill rule of
// docs/DESIGN.md §1.2 bit for bit: a row's output does not depend on M, on the rows around it, on where
// the rows were cut into calls, or on sharing x with other weights (matmul_multi_prefill).
#include <cmath>
#include <iterator>
#include <vector>

#include "backend/cuda/cuda_memory.h"
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

// The SwiGLU form (Ops::matmul_prefill_swiglu): the bits of matmul_multi_prefill of gate and up then swiglu,
// every element written (out poisoned first); and its bf16 copy is what the down projection reads next:
// matmul_prefill of out right after gives the bits of matmul_prefill of a device copy of out, with the
// conversion scratch poisoned with NaN first (a register the epilogue failed to write would show). Shapes
// with one row, a partial 128-column tile, an odd N, a partial M tile, K off the 64 grid, several persistent
// rounds.
TEST_P(PrefillMatmul, SwigluFormEqualsMatmulsThenSwiglu) {
  const auto [M, N, K] = GetParam();
  if (!cuda::kernels::wgmma_available()) GTEST_SKIP() << "not a compute capability 9.0 device";
  for (const int64_t I : {N, N + 1}) {
    SCOPED_TRACE(I);
    const DeviceBuffer x = DeviceBuffer::from(randn(size_t(M * K), 11));
    const DeviceBuffer wg = DeviceBuffer::from(to_bf16(randn(size_t(I * K), 12, 0.05f))),
                       wu = DeviceBuffer::from(to_bf16(randn(size_t(I * K), 13, 0.05f))),
                       wd = DeviceBuffer::from(to_bf16(randn(size_t(64 * I), 14, 0.05f)));
    const TensorView X = dev_view(x, DType::F32, {M, K}), G = dev_view(wg, DType::BF16, {I, K}),
                     U = dev_view(wu, DType::BF16, {I, K}), D = dev_view(wd, DType::BF16, {64, I});
    const DeviceBuffer g = poisoned(size_t(M * I)), u = poisoned(size_t(M * I)), fused = poisoned(size_t(M * I)),
                       copy = poisoned(size_t(M * I)), y_fused = poisoned(size_t(M * 64)),
                       y_plain = poisoned(size_t(M * 64));
    const TensorView ws[] = {G, U};
    const TensorView ys[] = {dev_view(g, DType::F32, {M, I}), dev_view(u, DType::F32, {M, I})};
    cuda_ops().matmul_multi_prefill(X, ws, ys);
    cuda_ops().swiglu(ys[0], ys[1], ys[0]);
    const auto want = download(g, size_t(M * I));
    {  // poison both scratches: a prefill GEMM of NaN rows as many and as wide as out (its x's copy), and the
      // SwiGLU form of NaN rows, more and wider than out (its own copy)
      DeviceBuffer nan = DeviceBuffer::from(std::vector<float>(size_t(M * I), NAN));
      cuda_ops().matmul_prefill(dev_view(nan, DType::F32, {M, I}), D, dev_view(y_plain, DType::F32, {M, 64}));
      const int64_t M2 = M + 32, I2 = I + 136;
      DeviceBuffer nan_x = DeviceBuffer::from(std::vector<float>(size_t(M2 * K), NAN)),
                   w2 = DeviceBuffer::from(to_bf16(randn(size_t(I2 * K), 15))), out2 = poisoned(size_t(M2 * I2));
      const TensorView W2 = dev_view(w2, DType::BF16, {I2, K});
      ASSERT_TRUE(cuda_ops().matmul_prefill_swiglu(dev_view(nan_x, DType::F32, {M2, K}), W2, W2,
                                                   dev_view(out2, DType::F32, {M2, I2})));
    }
    const TensorView OUT = dev_view(fused, DType::F32, {M, I});
    const uint64_t before = cuda::kernels::matmul_xb_reused();
    ASSERT_TRUE(cuda_ops().matmul_prefill_swiglu(X, G, U, OUT));
    if (I % 8 != 0) {  // the prefill GEMM cannot take K = I (the TMA's 16-byte rows): only out's bits
      ASSERT_TRUE(bit_equal(download(fused, size_t(M * I)).data(), want.data(), want.size()));
      continue;
    }
    cuda_ops().matmul_prefill(OUT, D, dev_view(y_fused, DType::F32, {M, 64}));
    EXPECT_EQ(cuda::kernels::matmul_xb_reused(), before + 1) << "the down projection read the copy";
    ASSERT_TRUE(bit_equal(download(fused, size_t(M * I)).data(), want.data(), want.size()));
    cuda_memory().copy(copy.data(), fused.data(), size_t(M * I) * 4);
    cuda_ops().matmul_prefill(dev_view(copy, DType::F32, {M, I}), D, dev_view(y_plain, DType::F32, {M, 64}));
    const auto plain = download(y_plain, size_t(M * 64));
    for (float v : plain) ASSERT_TRUE(std::isfinite(v));
    EXPECT_TRUE(bit_equal(download(y_fused, size_t(M * 64)).data(), plain.data(), plain.size()));
  }
}

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
