// The TMA-fed slice-serial warpgroup matmul (cuda/matmul_wgmma_tma_sm90a.cu) on the GPU: every row of calls
// of 33-256 rows bit-equal to the row computed alone (M = 1: the gemv kernel, the decode path), in every
// tile shape, as whole-tile units and as slice units (the running total handed from CTA to CTA), and by
// the plan's choice, on the 8B and 27B projection shapes and on shapes with N and K tails
// and slices that end inside a 64-k tile; several weights in one call equal to lone calls; a producer's copy
// of x read in place of the kernel's own; many slice-unit launches back to back (their flags left as they
// found them); and agreement with the contract's double reference, with y's
// padding untouched.
#include <array>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_memory.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/matmul_tensor_core.cuh"
#include "backend/cuda/matmul_tensor_core_xb.cuh"
#include "backend/cuda/matmul_wgmma_tma.cuh"
#include "backend/cuda/matmul_wgmma_tma.h"
#include "backend/matmul_choice.h"
#include "cuda_test_util.h"
#include "tc_reference.h"

namespace specserve::cuda_test {
namespace {

namespace k = cuda::kernels;
namespace tc = cuda::tc;

constexpr int64_t kCallRows[] = {33, 64, 65, 128, 200, 256};
constexpr int64_t kRows = 256 + 16;  // rows of x: every call starts at row 0 or a few rows in

k::MatmulArgs args(const DeviceBuffer& x, int64_t first, int64_t M, const DeviceBuffer& w, int64_t N, int64_t K,
                   DeviceBuffer& y) {
  return k::MatmulArgs{.x = x.as<const float>() + first * K,
                       .ldx = K,
                       .w = w.data(),
                       .w_bf16 = true,
                       .ldw = K,
                       .y = y.as<float>(),
                       .ldy = N,
                       .M = M,
                       .N = N,
                       .K = K};
}

// Row m of x alone (M = 1: the gemv kernel) for every m < rows.
std::vector<float> rows_alone(const TensorView& X, const TensorView& W, int64_t rows, int64_t N) {
  std::vector<float> alone(size_t(rows * N));
  for (int64_t m = 0; m < rows; ++m) {
    DeviceBuffer y1 = poisoned(size_t(N));
    cuda_ops().matmul(X.rows(m, m + 1), W, dev_view(y1, DType::F32, {1, N}));
    y1.download(alone.data() + m * N, size_t(N) * 4);
  }
  return alone;
}

void check_rows_bit_equal(int64_t N, int64_t K) {
  if (!k::wgmma_available()) GTEST_SKIP() << "not a compute capability 9.0 device";
  const std::string where = " (N " + std::to_string(N) + ", K " + std::to_string(K) + ", S " +
                            std::to_string(tc::k_split(N, K).S) + ", cps " + std::to_string(tc::k_split(N, K).cps) +
                            ")";
  const auto x = randn(size_t(kRows * K), 11 + uint32_t(K)), wf = randn(size_t(N * K), 12 + uint32_t(N), 0.05f);
  DeviceBuffer dx = DeviceBuffer::from(x), dw = DeviceBuffer::from(to_bf16(wf));
  const TensorView X = dev_view(dx, DType::F32, {kRows, K}), W = dev_view(dw, DType::BF16, {N, K});
  const auto alone = rows_alone(X, W, kRows, N);
  for (float v : alone) ASSERT_TRUE(std::isfinite(v)) << where;
  auto expect_rows = [&](const DeviceBuffer& y, int64_t first, int64_t M, const std::string& what) {
    const auto got = download(y, size_t(M * N));
    for (int64_t m = 0; m < M; ++m)
      ASSERT_TRUE(bit_equal(got.data() + m * N, alone.data() + (first + m) * N, size_t(N)))
          << "row " << first + m << " at " << m << " of " << what << where;
  };
  MatmulWeight mw;
  mw.N = N;
  mw.ldw = K;
  mw.ldy = N;
  for (int64_t M : kCallRows)
    for (int64_t first : {int64_t{0}, M % 13 + 1}) {
      const std::string at = "M=" + std::to_string(M) + " from row " + std::to_string(first);
      // Every tile shape and split, forced.
      for (int shape = 0; shape < cuda::wgt::kWgtShapes; ++shape)
        for (int split = 0; split < cuda::wgt::kWgtSplits; ++split) {
          DeviceBuffer y = poisoned(size_t(M * N));
          const k::MatmulArgs a = args(dx, first, M, dw, N, K, y);
          ASSERT_TRUE(k::matmul_bf16_wgmma_tma(&a, 1, cuda::cuda_stream(), shape, split)) << at << where;
          expect_rows(y, first, M, "shape " + std::to_string(shape) + " split " + std::to_string(split) + ", " + at);
        }
      // The plan's choice (Ops::matmul): the kernel where the plan says so.
      const bool planned = choose_matmul(MatmulBackend::Cuda, MatmulOrder::RowInvariant, M, K, mw,
                                         k::matmul_device()) == MatmulKernel::WgmmaTma;
      const uint64_t before = k::matmul_wgmma_tma_launches();
      DeviceBuffer y = poisoned(size_t(M * N));
      cuda_ops().matmul(X.rows(first, first + M), W, dev_view(y, DType::F32, {M, N}));
      expect_rows(y, first, M, "Ops::matmul, " + at);
      EXPECT_EQ(k::matmul_wgmma_tma_launches() > before, planned) << at << where;
    }
}

// The 8B's projections (S = 8, 8, 4, 8; slices of 32, 32, 64, 96 chunks).
TEST_F(Gpu, WgmmaTmaRowsBitEqualQwen8bQ) { check_rows_bit_equal(4096, 4096); }
TEST_F(Gpu, WgmmaTmaRowsBitEqualQwen8bKv) { check_rows_bit_equal(1024, 4096); }
TEST_F(Gpu, WgmmaTmaRowsBitEqualQwen8bGate) { check_rows_bit_equal(12288, 4096); }
TEST_F(Gpu, WgmmaTmaRowsBitEqualQwen8bDown) { check_rows_bit_equal(4096, 12288); }
// The 27B's (o: S = 8, cps 48; down: S = 8, cps 136; up: S = 2, cps 160; k/v at K 5,120).
TEST_F(Gpu, WgmmaTmaRowsBitEqualQwen27bO) { check_rows_bit_equal(5120, 6144); }
TEST_F(Gpu, WgmmaTmaRowsBitEqualQwen27bDown) { check_rows_bit_equal(5120, 17408); }
TEST_F(Gpu, WgmmaTmaRowsBitEqualQwen27bUp) { check_rows_bit_equal(17408, 5120); }
TEST_F(Gpu, WgmmaTmaRowsBitEqualQwen27bKv) { check_rows_bit_equal(1024, 5120); }
// Tails: slices that end inside a 64-k tile (cps % 4 != 0: S = 8 with cps 33 and a short last slice; S = 4
// with cps 33), the K tail inside the last chunk (K % 16 == 8), N tails below a tile, S = 1.
TEST_F(Gpu, WgmmaTmaRowsBitEqualN1000K4104) { check_rows_bit_equal(1000, 4104); }
TEST_F(Gpu, WgmmaTmaRowsBitEqualN384K2056) { check_rows_bit_equal(384, 2056); }
TEST_F(Gpu, WgmmaTmaRowsBitEqualN70K1000) { check_rows_bit_equal(70, 1000); }
TEST_F(Gpu, WgmmaTmaRowsBitEqualN3000K496) { check_rows_bit_equal(3000, 496); }
TEST_F(Gpu, WgmmaTmaRowsBitEqualN130K8) { check_rows_bit_equal(130, 8); }

// Adversarial data (exponents over 2^-40 .. 2^40, zeros of both signs, subnormal-range and tied values; a
// row of -0): every shape's rows equal the rows alone, bit for bit, where the slices end mid-tile.
TEST_F(Gpu, WgmmaTmaBitEqualOnAdversarialData) {
  if (!k::wgmma_available()) GTEST_SKIP() << "not a compute capability 9.0 device";
  std::mt19937 rng(99);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-40, 40), pick(0, 15);
  auto value = [&]() {
    const int kind = pick(rng);
    if (kind == 0) return 0.0f;
    if (kind == 1) return -0.0f;
    if (kind == 2) return std::ldexp(nd(rng), -128);
    if (kind == 3) return std::ldexp(1.0f, exponent(rng) / 4);
    return std::ldexp(nd(rng), exponent(rng));
  };
  for (auto [M, N, K] : {std::array<int64_t, 3>{200, 384, 2056}, {64, 4096, 1000}, {256, 520, 4104}}) {
    std::vector<float> x(size_t(M * K)), wf(size_t(N * K));
    for (float& v : x) v = value();
    for (float& v : wf) v = value();
    for (int64_t kk = 0; kk < K; ++kk) x[size_t(3 * K + kk)] = -0.0f;
    DeviceBuffer dx = DeviceBuffer::from(x), dw = DeviceBuffer::from(to_bf16(wf));
    const TensorView X = dev_view(dx, DType::F32, {M, K}), W = dev_view(dw, DType::BF16, {N, K});
    const auto alone = rows_alone(X, W, M, N);
    const std::string where = "M " + std::to_string(M) + ", N " + std::to_string(N) + ", K " + std::to_string(K);
    for (int shape = -1; shape < cuda::wgt::kWgtShapes; ++shape)
      for (int split = 0; split < cuda::wgt::kWgtSplits; ++split) {
        DeviceBuffer y = poisoned(size_t(M * N));
        const k::MatmulArgs a = args(dx, 0, M, dw, N, K, y);
        ASSERT_TRUE(k::matmul_bf16_wgmma_tma(&a, 1, cuda::cuda_stream(), shape, split));
        const auto got = download(y, size_t(M * N));
        EXPECT_TRUE(bit_equal(got.data(), alone.data(), got.size()))
            << "shape " << shape << " split " << split << ", " << where;
      }
  }
}

// Against the contract's reference (bf16(x) · w in double): a transposed, misaddressed or mis-swizzled
// operand would be off by O(1). y is columns [3, 3 + N) of rows N + 5 wide (the one-float stores), and the
// columns beside it stay NaN.
TEST_F(Gpu, WgmmaTmaAgreesWithTheReference) {
  if (!k::wgmma_available()) GTEST_SKIP() << "not a compute capability 9.0 device";
  for (auto [M, N, K] : {std::array<int64_t, 3>{33, 1000, 4104}, {128, 4096, 4096}, {256, 70, 1000}, {65, 384, 2056}}) {
    const auto x = randn(size_t(M * K), 31 + uint32_t(M)), wf = randn(size_t(N * K), 32 + uint32_t(N), 0.05f);
    const auto w = to_bf16(wf);
    DeviceBuffer dx = DeviceBuffer::from(x), dw = DeviceBuffer::from(w);
    const int64_t ld = N + 5;
    const auto want = reference(x.data(), K, w.data(), K, M, N, K);  // once: the CPU's 2 GMAC at 128 x 4096 x 4096
    for (int variant = -1; variant < 2 * cuda::wgt::kWgtShapes; ++variant) {
      const int shape = variant < 0 ? -1 : variant / 2, split = variant < 0 ? -1 : variant % 2;
      DeviceBuffer y = poisoned(size_t(M * ld));
      k::MatmulArgs a = args(dx, 0, M, dw, N, K, y);
      a.y = y.as<float>() + 3;
      a.ldy = ld;
      ASSERT_TRUE(k::matmul_bf16_wgmma_tma(&a, 1, cuda::cuda_stream(), shape, split));
      const auto got = download(y, size_t(M * ld));
      std::vector<float> yv(size_t(M * N));
      for (int64_t m = 0; m < M; ++m)
        for (int64_t c = 0; c < ld; ++c) {
          const float v = got[size_t(m * ld + c)];
          if (c >= 3 && c < 3 + N)
            yv[size_t(m * N + c - 3)] = v;
          else
            ASSERT_TRUE(std::isnan(v)) << "wrote column " << c << " of row " << m << ", variant " << variant;
        }
      EXPECT_LT(rel_err(yv, want), 2e-4) << "M " << M << ", N " << N << ", K " << K << ", variant " << variant;
    }
  }
}

// Several weights in one call (q/k/v, gate/up; five weights: two launches over one copy of x) equal the
// lone calls bit for bit, by the launcher and through Ops::matmul_multi.
TEST_F(Gpu, WgmmaTmaSeveralWeightsEqualLoneCalls) {
  if (!k::wgmma_available()) GTEST_SKIP() << "not a compute capability 9.0 device";
  const int64_t K = 4096;
  const int64_t widths[] = {4096, 1024, 1024, 520, 12288};
  constexpr int kWeights = 5;
  for (int64_t M : {64, 128, 200}) {
    const auto x = randn(size_t(M * K), 41 + uint32_t(M));
    DeviceBuffer dx = DeviceBuffer::from(x);
    std::vector<DeviceBuffer> dws, multi, single, planned;
    std::vector<TensorView> ws, ys;
    for (int i = 0; i < kWeights; ++i) {
      dws.push_back(DeviceBuffer::from(to_bf16(randn(size_t(widths[i] * K), 42 + uint32_t(i), 0.05f))));
      multi.push_back(poisoned(size_t(M * widths[i])));
      single.push_back(poisoned(size_t(M * widths[i])));
      planned.push_back(poisoned(size_t(M * widths[i])));
      ws.push_back(dev_view(dws.back(), DType::BF16, {widths[i], K}));
      ys.push_back(dev_view(planned.back(), DType::F32, {M, widths[i]}));
    }
    std::vector<k::MatmulArgs> parts;
    for (int i = 0; i < kWeights; ++i) parts.push_back(args(dx, 0, M, dws[size_t(i)], widths[i], K, multi[size_t(i)]));
    ASSERT_TRUE(k::matmul_bf16_wgmma_tma(parts.data(), kWeights, cuda::cuda_stream()));
    // The same weights as slice units and as whole tiles, each shape (the hand-over's tiles numbered
    // across the weights of a launch).
    for (int shape = 0; shape < cuda::wgt::kWgtShapes; ++shape)
      for (int split = 0; split < cuda::wgt::kWgtSplits; ++split) {
        std::vector<DeviceBuffer> forced;
        std::vector<k::MatmulArgs> fparts;
        for (int i = 0; i < kWeights; ++i) forced.push_back(poisoned(size_t(M * widths[i])));
        for (int i = 0; i < kWeights; ++i)
          fparts.push_back(args(dx, 0, M, dws[size_t(i)], widths[i], K, forced[size_t(i)]));
        ASSERT_TRUE(k::matmul_bf16_wgmma_tma(fparts.data(), kWeights, cuda::cuda_stream(), shape, split));
        for (int i = 0; i < kWeights; ++i) {
          const auto a = download(multi[size_t(i)], size_t(M * widths[i]));
          const auto f = download(forced[size_t(i)], size_t(M * widths[i]));
          EXPECT_TRUE(bit_equal(f.data(), a.data(), f.size()))
              << "weight " << i << ", M " << M << ", shape " << shape << " split " << split;
        }
      }
    const TensorView X = dev_view(dx, DType::F32, {M, K});
    cuda_ops().matmul_multi(X, ws, ys);
    for (int i = 0; i < kWeights; ++i) {
      const k::MatmulArgs one = args(dx, 0, M, dws[size_t(i)], widths[i], K, single[size_t(i)]);
      ASSERT_TRUE(k::matmul_bf16_wgmma_tma(&one, 1, cuda::cuda_stream()));
      const auto a = download(multi[size_t(i)], size_t(M * widths[i]));
      const auto b = download(single[size_t(i)], size_t(M * widths[i]));
      const auto c = download(planned[size_t(i)], size_t(M * widths[i]));
      for (float v : a) ASSERT_TRUE(std::isfinite(v));
      EXPECT_TRUE(bit_equal(a.data(), b.data(), a.size())) << "weight " << i << ", M " << M;
      EXPECT_TRUE(bit_equal(c.data(), b.data(), c.size())) << "matmul_multi, weight " << i << ", M " << M;
    }
  }
}

// Many slice-unit launches back to back, with no synchronisation between them, of different tile counts
// and shapes over one scratch: each launch finds every flag at 0 (the last slice of each tile put it back),
// so every result equals the lone row's bits; a stale flag would let a unit add a total not yet written.
TEST_F(Gpu, WgmmaTmaSliceUnitsBackToBack) {
  if (!k::wgmma_available()) GTEST_SKIP() << "not a compute capability 9.0 device";
  struct Case {
    int64_t M, N, K;
  };
  const Case cases[] = {{128, 4096, 4096}, {64, 1000, 4104}, {256, 1024, 4096}, {33, 3000, 496}, {200, 384, 2056}};
  constexpr int kCases = 5, kRounds = 8;
  std::vector<DeviceBuffer> dx, dw;
  std::vector<std::vector<float>> alone;
  for (int c = 0; c < kCases; ++c) {
    const auto [M, N, K] = cases[c];
    dx.push_back(DeviceBuffer::from(randn(size_t(M * K), 71 + uint32_t(c))));
    dw.push_back(DeviceBuffer::from(to_bf16(randn(size_t(N * K), 72 + uint32_t(c), 0.05f))));
    alone.push_back(
        rows_alone(dev_view(dx.back(), DType::F32, {M, K}), dev_view(dw.back(), DType::BF16, {N, K}), M, N));
  }
  std::vector<DeviceBuffer> ys;
  std::vector<int> which;
  for (int r = 0; r < kRounds; ++r)
    for (int c = 0; c < kCases; ++c) {
      const auto [M, N, K] = cases[c];
      const int shape = M <= 64 ? int(cuda::wgt::WgtShape::M64N128) : (r + c) % 2;  // 128 x 128 or 128 x 64
      ys.push_back(poisoned(size_t(M * N)));
      const k::MatmulArgs a = args(dx[size_t(c)], 0, M, dw[size_t(c)], N, K, ys.back());
      ASSERT_TRUE(k::matmul_bf16_wgmma_tma(&a, 1, cuda::cuda_stream(), shape, int(cuda::wgt::WgtSplit::Slices)));
      which.push_back(c);
    }
  for (size_t i = 0; i < ys.size(); ++i) {
    const int c = which[i];
    const auto got = download(ys[i], size_t(cases[c].M * cases[c].N));
    EXPECT_TRUE(bit_equal(got.data(), alone[size_t(c)].data(), got.size()))
        << "launch " << i << ": M " << cases[c].M << ", N " << cases[c].N << ", K " << cases[c].K;
  }
}

// A producer's bf16 copy of x (XbOut: another pitch, the gemv kernel's) is read in place of the kernel's
// own conversion, with the same bits.
TEST_F(Gpu, WgmmaTmaReadsAProducersCopyOfX) {
  if (!k::wgmma_available()) GTEST_SKIP() << "not a compute capability 9.0 device";
  const int64_t M = 128, N = 1024, K = 4104;
  const auto x = randn(size_t(M * K), 51);
  DeviceBuffer dx = DeviceBuffer::from(x), dw = DeviceBuffer::from(to_bf16(randn(size_t(N * K), 52, 0.05f)));
  DeviceBuffer y0 = poisoned(size_t(M * N)), y1 = poisoned(size_t(M * N));
  const k::MatmulArgs own = args(dx, 0, M, dw, N, K, y0);
  ASSERT_TRUE(k::matmul_bf16_wgmma_tma(&own, 1, cuda::cuda_stream()));
  const auto want = download(y0, size_t(M * N));
  const k::XbOut xb = k::matmul_xb_out(M, K, cuda::cuda_stream());
  ASSERT_NE(xb.regs, nullptr);
  const int64_t pitch = xb.pitch;
  const uint16_t* copy = k::matmul_x_to_bf16(dx.as<const float>(), K, M, K, pitch, cuda::cuda_stream());
  k::MatmulArgs reuse = args(dx, 0, M, dw, N, K, y1);
  reuse.xb = copy;
  reuse.ldxb = pitch;
  const uint64_t reused = k::matmul_xb_reused();
  ASSERT_TRUE(k::matmul_bf16_wgmma_tma(&reuse, 1, cuda::cuda_stream()));
  EXPECT_EQ(k::matmul_xb_reused(), reused + 1);
  const auto got = download(y1, size_t(M * N));
  EXPECT_TRUE(bit_equal(got.data(), want.data(), got.size()));
}

// It declines what it cannot address (the plan sends those elsewhere): K % 8 != 0, a weight not 16-byte
// aligned or with ldw % 8 != 0, f32 weights.
TEST_F(Gpu, WgmmaTmaDeclinesWhatTmaCannotAddress) {
  DeviceBuffer dx = DeviceBuffer::from(randn(64 * 1001, 61)), dw = DeviceBuffer::from(to_bf16(randn(64 * 1001, 62)));
  DeviceBuffer y = poisoned(64 * 64);
  k::MatmulArgs a = args(dx, 0, 64, dw, 64, 1001, y);
  EXPECT_FALSE(k::wgmma_tma_fits(a));
  EXPECT_FALSE(k::matmul_bf16_wgmma_tma(&a, 1, cuda::cuda_stream()));
  a.K = 1000;
  a.ldx = 1000;
  a.ldw = 1001;
  EXPECT_FALSE(k::wgmma_tma_fits(a));
  a.ldw = 1000;
  a.w = static_cast<const uint16_t*>(dw.data()) + 1;
  EXPECT_FALSE(k::wgmma_tma_fits(a));
  a.w = dw.data();
  EXPECT_TRUE(k::wgmma_tma_fits(a));
  a.w_bf16 = false;
  EXPECT_FALSE(k::wgmma_tma_fits(a));
}

}  // namespace
}  // namespace specserve::cuda_test
