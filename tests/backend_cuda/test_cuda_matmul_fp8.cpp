// Block-scaled fp8 weights on CUDA (backend/ops.h, Ops::matmul: the bits of the bf16 dequantisation;
// cuda/matmul_fp8_gemv.cu for 1-32 rows, cuda/matmul_fp8_dequant.cu beyond and for prefill): the
// dequantisation pass against the definition's bits; every matmul bit for bit equal to the CUDA matmul of
// the bf16 dequantisation (row-invariant and prefill orders, odd shapes, misaligned codes, x's producer
// copy) and close to the CPU fp8 path; rows bit-invariant (a row alone, inside 16, inside 32, inside more);
// matmul_multi with fp8 and bf16 weights equal to separate calls. Mirrors test_cuda_matmul_tensor_core.cpp.
#include <cstring>
#include <vector>

#include "../backend/fp8_test_weights.h"
#include "backend/cuda/kernels.h"
#include "cuda_test_util.h"

namespace specserve::cuda_test {
namespace {

using specserve::testing::Fp8TestWeight;
using specserve::testing::make_fp8_weight;

// The fp8 weight (codes and scales) and its bf16 dequantisation on the device. With `pad` > 0 the codes
// sit one byte past an aligned start with rows K + pad apart (the scalar load path).
struct DeviceFp8 {
  Fp8TestWeight host;
  DeviceBuffer codes, scales, bf16;
  TensorView fp8_view, bf16_view;
  DeviceFp8(int64_t N, int64_t K, uint32_t seed, int64_t pad = 0, bool tiny = false)
      : host(make_fp8_weight(N, K, seed, tiny)) {
    const int64_t ld = K + pad, off = pad ? 1 : 0;
    std::vector<uint8_t> c(size_t(N * ld + off), 0);
    for (int64_t n = 0; n < N; ++n) std::memcpy(c.data() + off + n * ld, host.codes.as<uint8_t>() + n * K, size_t(K));
    codes = DeviceBuffer::from(c);
    scales =
        DeviceBuffer::from(std::vector<float>(host.scales.as<float>(), host.scales.as<float>() + host.scales.numel()));
    bf16 = DeviceBuffer::from(std::vector<uint16_t>(host.bf16.as<uint16_t>(), host.bf16.as<uint16_t>() + N * K));
    fp8_view = TensorView::contiguous(codes.as<uint8_t>() + off, DType::F8_E4M3, {N, K}, Device::CUDA);
    fp8_view.strides[0] = ld;
    fp8_view.scales = scales.as<const float>();
    bf16_view = dev_view(bf16, DType::BF16, {N, K});
  }
};

std::vector<float> run(const TensorView& x, const TensorView& w, bool prefill = false) {
  const int64_t M = x.dim(0), N = w.dim(0);
  DeviceBuffer y = poisoned(size_t(M * N));
  if (prefill)
    cuda_ops().matmul_prefill(x, w, dev_view(y, DType::F32, {M, N}));
  else
    cuda_ops().matmul(x, w, dev_view(y, DType::F32, {M, N}));
  return download(y, size_t(M * N));
}

struct Dims {
  int64_t N, K;
};
// K below, across and far past a 128 block, not a multiple of 16; N with partial 128-row blocks; the split
// of K at S = 1, 2, 8 (k_split); a single column.
const Dims kShapes[] = {{13, 37},    {300, 1000},  {257, 130},  {1, 200},     {130, 3},     {4096, 4096},
                        {64, 12288}, {1000, 4104}, {3000, 496}, {1024, 4096}, {24576, 1001}};

TEST_F(Gpu, Fp8DequantPassHasTheDefinitionsBits) {
  for (bool tiny : {false, true})
    for (const Dims& d : {Dims{300, 1000}, Dims{129, 37}, Dims{5, 1}}) {
      DeviceFp8 w(d.N, d.K, uint32_t(d.N + d.K), 0, tiny);
      const int64_t ldo = d.K + 8;
      DeviceBuffer out(size_t(d.N * ldo) * 2);
      cuda::kernels::fp8_dequantize_bf16(w.codes.as<uint8_t>(), d.K, w.scales.as<float>(), w.host.scales.shape()[1],
                                         d.N, d.K, out.as<uint16_t>(), ldo, cuda::cuda_stream());
      const auto got = out.to_vector<uint16_t>(size_t(d.N * ldo));
      for (int64_t n = 0; n < d.N; ++n)
        ASSERT_EQ(0, std::memcmp(got.data() + n * ldo, w.host.bf16.as<uint16_t>() + n * d.K, size_t(d.K) * 2))
            << "row " << n << " of " << d.N << "x" << d.K << (tiny ? ", tiny scales" : "");
    }
}

// Bit for bit the bf16 dequantisation's matmul (the same call with w.bf16), at the decode / verify row
// counts (fp8 gemv), above 32 rows (the dequantised weight through the bf16 plan) and as prefill; and within
// the bf16 tolerance of the CPU's fp8 path.
TEST_F(Gpu, Fp8MatmulHasTheBitsOfTheBf16Dequantisation) {
  for (const Dims& d : kShapes) {
    DeviceFp8 w(d.N, d.K, uint32_t(3 * d.N + d.K));
    const auto x = randn(size_t(64 * d.K), uint32_t(d.K + 1));
    DeviceBuffer dx = DeviceBuffer::from(x);
    for (int64_t M : {1, 2, 4, 5, 8, 16, 17, 32, 33, 64}) {
      const TensorView X = dev_view(dx, DType::F32, {M, d.K});
      const std::string where = "M " + std::to_string(M) + " N " + std::to_string(d.N) + " K " + std::to_string(d.K);
      const auto got = run(X, w.fp8_view), want = run(X, w.bf16_view);
      ASSERT_TRUE(bit_equal(got.data(), want.data(), got.size())) << where;
      const auto got_p = run(X, w.fp8_view, true), want_p = run(X, w.bf16_view, true);
      ASSERT_TRUE(bit_equal(got_p.data(), want_p.data(), got_p.size())) << "prefill, " << where;
      if (M == 1 || M == 17 || M == 64) {
        std::vector<float> cpu(size_t(M * d.N));
        cpu_ops().matmul(host_view(x.data(), DType::F32, {M, d.K}), w.host.view(),
                         host_view(cpu.data(), DType::F32, {M, d.N}));
        EXPECT_LT(rel_err(got, cpu), 1e-2) << "against the CPU, " << where;
      }
    }
  }
}

// A row's bits do not depend on the rows beside it: every row alone (M = 1) equals the row inside 16, 32 and
// more rows starting at different rows (so it sits at other fragment positions), from misaligned codes too.
void check_fp8_row_invariance(int64_t N, int64_t K) {
  const int64_t kRows = 96;
  DeviceFp8 w(N, K, uint32_t(N + 7 * K)), w_odd(N, K, uint32_t(N + 7 * K), /*pad=*/3);
  const auto x = randn(size_t(kRows * K), uint32_t(K + 11));
  DeviceBuffer dx = DeviceBuffer::from(x);
  const TensorView X = dev_view(dx, DType::F32, {kRows, K});
  const std::string where = " (N " + std::to_string(N) + ", K " + std::to_string(K) + ")";
  std::vector<float> alone(size_t(kRows * N));
  for (int64_t m = 0; m < kRows; ++m) {
    const auto y = run(X.rows(m, m + 1), m % 7 == 0 ? w_odd.fp8_view : w.fp8_view);
    std::copy(y.begin(), y.end(), alone.begin() + m * N);
  }
  for (float v : alone) ASSERT_TRUE(std::isfinite(v)) << where;
  for (int64_t M : {2, 5, 16, 17, 24, 32, 40, 64, 80})
    for (int64_t first : {int64_t{0}, M % 13 + 1}) {
      const auto y = run(X.rows(first, first + M), first % 2 ? w_odd.fp8_view : w.fp8_view);
      for (int64_t m = 0; m < M; ++m)
        ASSERT_TRUE(bit_equal(y.data() + m * N, alone.data() + (first + m) * N, size_t(N)))
            << "row " << first + m << " at " << m << " of M=" << M << where;
    }
}

TEST_F(Gpu, Fp8RowInvarianceN4096K4096) { check_fp8_row_invariance(4096, 4096); }  // S = 8: q/o_proj
TEST_F(Gpu, Fp8RowInvarianceOddK) { check_fp8_row_invariance(257, 1001); }
TEST_F(Gpu, Fp8RowInvarianceN64K12288) { check_fp8_row_invariance(64, 12288); }  // S = 8, long slices
TEST_F(Gpu, Fp8RowInvarianceN3000K496) { check_fp8_row_invariance(3000, 496); }  // S = 1
TEST_F(Gpu, Fp8RowInvarianceTinyK) { check_fp8_row_invariance(130, 3); }

// Prefill rows: a row's bits do not depend on the rows of its call (its chunk).
TEST_F(Gpu, Fp8PrefillRowsDoNotDependOnTheirCall) {
  const int64_t N = 1000, K = 4104;
  DeviceFp8 w(N, K, 61);
  const auto x = randn(size_t(300 * K), 62);
  DeviceBuffer dx = DeviceBuffer::from(x);
  const TensorView X = dev_view(dx, DType::F32, {300, K});
  const auto all = run(X, w.fp8_view, true);
  for (int64_t first : {0, 7, 250}) {
    const auto one = run(X.rows(first, first + 1), w.fp8_view, true);
    ASSERT_TRUE(bit_equal(one.data(), all.data() + first * N, size_t(N))) << "row " << first;
    const auto part = run(X.rows(first, first + 40), w.fp8_view, true);
    ASSERT_TRUE(bit_equal(part.data(), all.data() + first * N, size_t(40 * N))) << "rows from " << first;
  }
}

// matmul_multi over fp8 and bf16 weights (q/k/v, gate/up) equals one matmul per weight, in both orders.
TEST_F(Gpu, Fp8MatmulMultiEqualsSeparateMatmuls) {
  const int64_t K = 4096;
  DeviceFp8 q(4096, K, 71), k(1024, K, 72);
  const Fp8TestWeight vh = make_fp8_weight(1024, K, 73);
  DeviceBuffer v = DeviceBuffer::from(std::vector<uint16_t>(vh.bf16.as<uint16_t>(), vh.bf16.as<uint16_t>() + 1024 * K));
  const TensorView V = dev_view(v, DType::BF16, {1024, K});
  const auto x = randn(size_t(64 * K), 74);
  DeviceBuffer dx = DeviceBuffer::from(x);
  for (int64_t M : {1, 8, 16, 32, 64})
    for (bool prefill : {false, true}) {
      const TensorView X = dev_view(dx, DType::F32, {M, K});
      DeviceBuffer yq = poisoned(size_t(M * 4096)), yk = poisoned(size_t(M * 1024)), yv = poisoned(size_t(M * 1024));
      const TensorView ws[3] = {q.fp8_view, k.fp8_view, V};
      const TensorView ys[3] = {dev_view(yq, DType::F32, {M, 4096}), dev_view(yk, DType::F32, {M, 1024}),
                                dev_view(yv, DType::F32, {M, 1024})};
      if (prefill)
        cuda_ops().matmul_multi_prefill(X, ws, ys);
      else
        cuda_ops().matmul_multi(X, ws, ys);
      const std::string what = "M " + std::to_string(M) + (prefill ? " prefill" : "");
      EXPECT_TRUE(
          bit_equal(download(yq, size_t(M * 4096)).data(), run(X, q.bf16_view, prefill).data(), size_t(M * 4096)))
          << what;
      EXPECT_TRUE(
          bit_equal(download(yk, size_t(M * 1024)).data(), run(X, k.bf16_view, prefill).data(), size_t(M * 1024)))
          << what;
      EXPECT_TRUE(bit_equal(download(yv, size_t(M * 1024)).data(), run(X, V, prefill).data(), size_t(M * 1024)))
          << what;
    }
}

// From 5 rows the fp8 gemv kernel reads x through its bf16 copy; when x's producer (rms_norm) wrote that
// copy, the kernel reads it instead of converting x: the same bits, at the rows of each x mode (5-8, 9-16,
// two row blocks). The copy is used only when nothing was enqueued between the producer and the matmul
// (cuda_ops.cpp: take_xb), so the outputs are made (poisoned: a fill on the stream) before the norm — the
// first version of this test poisoned its output between the two, and never saw the copy used, at any M.
TEST_F(Gpu, Fp8GemvReadsTheProducersCopyWithTheSameBits) {
  const int64_t N = 1024, K = 4096, kMaxRows = 32;
  DeviceFp8 w(N, K, 81);
  const auto xh = randn(size_t(kMaxRows * K), 82);
  const auto gamma = randn(size_t(K), 83);
  DeviceBuffer dx = DeviceBuffer::from(xh), dg = DeviceBuffer::from(gamma), dn(size_t(kMaxRows * K) * 4);
  for (int64_t M : {5, 8, 9, 16, 17, 32}) {
    const TensorView X = dev_view(dx, DType::F32, {M, K}), Nx = dev_view(dn, DType::F32, {M, K});
    DeviceBuffer fused = poisoned(size_t(M * N)), plain = poisoned(size_t(M * N));
    const uint64_t before = cuda::kernels::matmul_xb_reused();
    cuda_ops().rms_norm(X, dev_view(dg, DType::F32, {K}), NormKind::Plain, 1e-6f, Nx);
    cuda_ops().matmul(Nx, w.fp8_view, dev_view(fused, DType::F32, {M, N}));  // right after its producer
    EXPECT_EQ(cuda::kernels::matmul_xb_reused(), before + 1) << "M " << M << ": the fp8 gemv read the norm's copy";
    cuda_ops().matmul(Nx, w.fp8_view, dev_view(plain, DType::F32, {M, N}));  // converts x itself
    EXPECT_EQ(cuda::kernels::matmul_xb_reused(), before + 1) << "M " << M;
    const auto got = download(fused, size_t(M * N));
    ASSERT_TRUE(bit_equal(got.data(), download(plain, size_t(M * N)).data(), got.size())) << "M " << M;
    ASSERT_TRUE(bit_equal(got.data(), run(Nx, w.bf16_view).data(), got.size())) << "M " << M;
  }
}

}  // namespace
}  // namespace specserve::cuda_test
