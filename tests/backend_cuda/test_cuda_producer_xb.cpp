// Producers that write their output's bf16 copy for the gemv kernel (kernels.h: XbOut): rms_norm,
// add_rms_norm and swiglu followed by a matmul of their output give the bits of the same matmul of a
// copy of that output (which converts x itself), for row counts below, at and above the copy's range
// and widths off the 16-element grid, with the conversion scratch poisoned with NaN first (a register
// the producer failed to write would show). The copy is in fact used, and not once anything else was
// enqueued between the producer and the matmul.
#include <cstdio>
#include <string>

#include "backend/cuda/cuda_memory.h"
#include "backend/cuda/kernels.h"
#include "backend/matmul_choice.h"
#include "cuda_test_util.h"

namespace specserve::cuda_test {
namespace {

namespace k = cuda::kernels;

struct XbCase {
  int64_t M, K, N;
};

class ProducerXb : public Gpu, public ::testing::WithParamInterface<XbCase> {
 protected:
  // y = x · wᵀ on the device (bf16 weights [N, K]) into y [M, N]: nothing but the matmul is enqueued,
  // so a producer's copy of x enqueued right before is still usable.
  static void matmul_into(const TensorView& x, const DeviceBuffer& w, int64_t N, const DeviceBuffer& y) {
    const int64_t M = x.dim(0), K = x.dim(1);
    cuda_ops().matmul(x, dev_view(w, DType::BF16, {N, K}), dev_view(y, DType::F32, {M, N}));
  }

  // Fills the matmul's bf16 scratch with NaN (a conversion of 32 NaN rows of 4,096).
  static void poison_scratch() {
    const std::vector<float> nan(32 * 4096, NAN);
    DeviceBuffer x = DeviceBuffer::from(nan), w = DeviceBuffer::from(to_bf16(randn(64 * 4096, 5)));
    matmul_into(dev_view(x, DType::F32, {32, 4096}), w, 64, poisoned(32 * 64));
  }

  // produce(out) then a matmul of out, against a matmul of a device copy of out.
  template <class Produce>
  void check(const char* what, Produce produce) {
    SCOPED_TRACE(what);
    const auto [M, K, N] = GetParam();
    const DeviceBuffer w = DeviceBuffer::from(to_bf16(randn(size_t(N * K), 17, 0.5f)));
    DeviceBuffer out(size_t(M * K) * 4), copy(size_t(M * K) * 4);
    const TensorView OUT = dev_view(out, DType::F32, {M, K}), COPY = dev_view(copy, DType::F32, {M, K});
    const DeviceBuffer y_fused = poisoned(size_t(M * N)), y_plain = poisoned(size_t(M * N)),
                       y_later = poisoned(size_t(M * N));
    // The gemv kernel reads the copy from gemv_xb_rows() rows; the TMA slice-serial kernel (33-256 rows on
    // sm_90a) reads it whenever the producer wrote one (above 32 rows producers write it for that kernel
    // and the prefill GEMM).
    const MatmulWeight weight{.N = N, .ldw = K, .ldy = N};
    const bool tma = M > k::gemv_max_rows() && k::wgmma_available() &&
                     choose_matmul(MatmulBackend::Cuda, MatmulOrder::RowInvariant, M, K, weight, k::matmul_device()) ==
                         MatmulKernel::WgmmaTma;
    const bool copied = (M >= k::gemv_xb_rows() && M <= k::gemv_max_rows()) || tma;

    poison_scratch();
    const uint64_t before = k::matmul_xb_reused();
    produce(OUT);
    matmul_into(OUT, w, N, y_fused);
    const uint64_t after = k::matmul_xb_reused();
    EXPECT_EQ(after - before, copied ? 1u : 0u) << "the matmul read the producer's copy";
    cuda_memory().copy(copy.data(), out.data(), size_t(M * K) * 4);
    matmul_into(COPY, w, N, y_plain);
    EXPECT_EQ(k::matmul_xb_reused(), after) << "a matmul of another tensor converts its own x";
    const auto plain = download(y_plain, size_t(M * N));
    ASSERT_TRUE(bit_equal(download(y_fused, size_t(M * N)).data(), plain.data(), plain.size()));

    // Anything enqueued between the producer and the matmul: the matmul converts x itself.
    DeviceBuffer other = DeviceBuffer::from(randn(64, 3));
    produce(OUT);
    cuda_ops().add(dev_view(other, DType::F32, {64}), dev_view(other, DType::F32, {64}));
    const uint64_t mid = k::matmul_xb_reused();
    matmul_into(OUT, w, N, y_later);
    EXPECT_EQ(k::matmul_xb_reused(), mid);
    ASSERT_TRUE(bit_equal(download(y_later, size_t(M * N)).data(), plain.data(), plain.size()));
  }
};

TEST_P(ProducerXb, MatmulOfTheOutputEqualsMatmulOfItsCopy) {
  const auto [M, K, N] = GetParam();
  const DeviceBuffer x = DeviceBuffer::from(randn(size_t(M * K), 1)), r = DeviceBuffer::from(randn(size_t(M * K), 2));
  const DeviceBuffer nw = DeviceBuffer::from(randn(size_t(K), 3, 0.3f));
  const DeviceBuffer gate = DeviceBuffer::from(randn(size_t(M * K), 4)),
                     up = DeviceBuffer::from(randn(size_t(M * K), 6));
  const TensorView X = dev_view(x, DType::F32, {M, K}), W = dev_view(nw, DType::F32, {K});
  for (NormKind kind : {NormKind::Plain, NormKind::ZeroCentred})
    check("rms_norm", [&](const TensorView& out) { cuda_ops().rms_norm(X, W, kind, 1e-6f, out); });
  DeviceBuffer residual(size_t(M * K) * 4);
  check("add_rms_norm", [&](const TensorView& out) {
    cuda_memory().copy(residual.data(), x.data(), size_t(M * K) * 4);  // the add updates it in place
    cuda_ops().add_rms_norm(dev_view(residual, DType::F32, {M, K}), dev_view(r, DType::F32, {M, K}), W,
                            NormKind::ZeroCentred, 1e-6f, out);
  });
  check("swiglu", [&](const TensorView& out) {
    cuda_ops().swiglu(dev_view(gate, DType::F32, {M, K}), dev_view(up, DType::F32, {M, K}), out);
  });
  check("swiglu in place", [&](const TensorView& out) {
    cuda_memory().copy(out.data, gate.data(), size_t(M * K) * 4);
    cuda_ops().swiglu(out, dev_view(up, DType::F32, {M, K}), out);
  });
}

INSTANTIATE_TEST_SUITE_P(Shapes, ProducerXb,
                         ::testing::Values(XbCase{5, 48, 40}, XbCase{9, 64, 72}, XbCase{16, 128, 96},
                                           XbCase{13, 200, 64}, XbCase{32, 4096, 256}, XbCase{16, 4096, 1024},
                                           XbCase{4, 64, 32}, XbCase{1, 4096, 64}, XbCase{33, 64, 32}),
                         [](const ::testing::TestParamInfo<XbCase>& i) {
                           char name[64];
                           std::snprintf(name, sizeof(name), "M%lld_K%lld_N%lld", static_cast<long long>(i.param.M),
                                         static_cast<long long>(i.param.K), static_cast<long long>(i.param.N));
                           return std::string(name);
                         });

}  // namespace
}  // namespace specserve::cuda_test
