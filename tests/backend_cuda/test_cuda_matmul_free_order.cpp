// Matmuls in a free summation order (ops.h: MatmulOrder::Free; backend/cuda/matmul_free_order.h):
// inside a ScopedMatmulOrder(Free), bf16 matmuls of more than 32 rows go through cuBLASLt and agree
// with the row-invariant kernels to float rounding (the same bf16 products, summed in another order:
// a transposed or misaddressed operand would be off by O(1)); every output element is written and
// nothing beside the output's columns; matmul_multi writes each part into its own columns of a shared
// row; row counts of one bucket share its algorithm (one heuristic query) and agree with the CPU. Calls
// that do not qualify (32 rows or fewer, f32 weights, K off the 8-element grid) and every call after
// the scope ends run the row-invariant kernels: the same bits as outside any scope.
#include <cmath>

#include "backend/cuda/matmul_free_order.h"
#include "cuda_test_util.h"

namespace specserve::cuda_test {
namespace {

struct FreeCase {
  int64_t M, N, K;
};

// y [M, N] as columns [col, col + N) of rows `ld` floats apart in `buf`.
TensorView columns(const DeviceBuffer& buf, int64_t M, int64_t N, int64_t ld, int64_t col) {
  TensorView v = TensorView::contiguous(static_cast<float*>(buf.data()) + col, DType::F32, {M, N}, Device::CUDA);
  v.strides[0] = ld;
  return v;
}

class FreeOrderMatmul : public Gpu, public ::testing::WithParamInterface<FreeCase> {};

TEST_P(FreeOrderMatmul, AgreesWithTheRowInvariantKernelsAndTakesThePath) {
  const auto [M, N, K] = GetParam();
  const DeviceBuffer x = DeviceBuffer::from(randn(size_t(M * K), 1));
  const DeviceBuffer w = DeviceBuffer::from(to_bf16(randn(size_t(N * K), 2, 0.05f)));
  const TensorView X = dev_view(x, DType::F32, {M, K}), W = dev_view(w, DType::BF16, {N, K});
  const DeviceBuffer fixed = poisoned(size_t(M * N)), free = poisoned(size_t(M * N));
  cuda_ops().matmul(X, W, dev_view(fixed, DType::F32, {M, N}));
  const uint64_t before = cuda::free_order_matmuls();
  {
    const ScopedMatmulOrder order(cuda_ops(), MatmulOrder::Free);
    cuda_ops().matmul(X, W, dev_view(free, DType::F32, {M, N}));
  }
  EXPECT_EQ(cuda::free_order_matmuls() - before, 1u) << "the call took the cuBLASLt path";
  const auto ref = download(fixed, size_t(M * N)), got = download(free, size_t(M * N));
  EXPECT_LT(rel_err(got, ref), 1e-5) << "M " << M << " N " << N << " K " << K;

  // After the scope: the row-invariant kernels again, the same bits.
  const DeviceBuffer after = poisoned(size_t(M * N));
  cuda_ops().matmul(X, W, dev_view(after, DType::F32, {M, N}));
  EXPECT_EQ(cuda::free_order_matmuls() - before, 1u);
  ASSERT_TRUE(bit_equal(download(after, size_t(M * N)).data(), ref.data(), ref.size()));
}

// matmul_accumulate: y + x · wᵀ in the GEMM's epilogue, inside the scope; outside it (and for calls the
// path does not take) false with y untouched.
TEST_P(FreeOrderMatmul, AccumulateAddsIntoY) {
  const auto [M, N, K] = GetParam();
  const DeviceBuffer x = DeviceBuffer::from(randn(size_t(M * K), 11));
  const DeviceBuffer w = DeviceBuffer::from(to_bf16(randn(size_t(N * K), 12, 0.05f)));
  const auto y0 = randn(size_t(M * N), 13);
  const TensorView X = dev_view(x, DType::F32, {M, K}), W = dev_view(w, DType::BF16, {N, K});
  const DeviceBuffer prod = poisoned(size_t(M * N)), acc = DeviceBuffer::from(y0);
  cuda_ops().matmul(X, W, dev_view(prod, DType::F32, {M, N}));
  EXPECT_FALSE(cuda_ops().matmul_accumulate(X, W, dev_view(acc, DType::F32, {M, N})));  // row-invariant order
  ASSERT_TRUE(bit_equal(download(acc, size_t(M * N)).data(), y0.data(), y0.size())) << "y untouched";
  {
    const ScopedMatmulOrder order(cuda_ops(), MatmulOrder::Free);
    EXPECT_TRUE(cuda_ops().matmul_accumulate(X, W, dev_view(acc, DType::F32, {M, N})));
  }
  auto want = download(prod, size_t(M * N));
  for (size_t i = 0; i < want.size(); ++i) want[i] += y0[i];
  EXPECT_LT(rel_err(download(acc, size_t(M * N)), want), 1e-5) << "M " << M << " N " << N << " K " << K;
}

// Under the free order a norm or a swiglu writes its output's bf16 copy (kernels.h: XbOut) and the
// cuBLASLt matmul right after reads it instead of converting x again: the same products, so the result
// agrees with the row-invariant kernels as before; with a launch between them the copy is not used.
TEST_P(FreeOrderMatmul, ReadsTheProducersBf16Copy) {
  const auto [M, N, K] = GetParam();
  const DeviceBuffer x = DeviceBuffer::from(randn(size_t(M * K), 21)), u = DeviceBuffer::from(randn(size_t(M * K), 22));
  const DeviceBuffer nw = DeviceBuffer::from(randn(size_t(K), 23));
  const DeviceBuffer w = DeviceBuffer::from(to_bf16(randn(size_t(N * K), 24, 0.05f)));
  const TensorView X = dev_view(x, DType::F32, {M, K}), U = dev_view(u, DType::F32, {M, K});
  const TensorView W = dev_view(w, DType::BF16, {N, K}), NW = dev_view(nw, DType::F32, {K});
  for (const bool swiglu : {false, true}) {
    SCOPED_TRACE(swiglu ? "swiglu" : "rms_norm");
    const DeviceBuffer h = poisoned(size_t(M * K)), fixed = poisoned(size_t(M * N)), free = poisoned(size_t(M * N));
    const TensorView H = dev_view(h, DType::F32, {M, K});
    uint64_t reused = 0;
    {
      const ScopedMatmulOrder order(cuda_ops(), MatmulOrder::Free);
      if (swiglu)
        cuda_ops().swiglu(X, U, H);
      else
        cuda_ops().rms_norm(X, NW, NormKind::Plain, 1e-6f, H);
      const uint64_t before = cuda::free_order_xb_reused();
      cuda_ops().matmul(H, W, dev_view(free, DType::F32, {M, N}));
      reused = cuda::free_order_xb_reused() - before;
    }
    EXPECT_EQ(reused, 1u) << "the matmul read the producer's copy";
    cuda_ops().matmul(H, W, dev_view(fixed, DType::F32, {M, N}));
    EXPECT_LT(rel_err(download(free, size_t(M * N)), download(fixed, size_t(M * N))), 1e-5);
  }
  // An add between the norm and the matmul: the copy is stale and not read.
  const DeviceBuffer h = poisoned(size_t(M * K)), y = poisoned(size_t(M * N));
  const TensorView H = dev_view(h, DType::F32, {M, K});
  const ScopedMatmulOrder order(cuda_ops(), MatmulOrder::Free);
  cuda_ops().rms_norm(X, NW, NormKind::Plain, 1e-6f, H);
  cuda_ops().add(H, U);
  const uint64_t before = cuda::free_order_xb_reused();
  cuda_ops().matmul(H, W, dev_view(y, DType::F32, {M, N}));
  EXPECT_EQ(cuda::free_order_xb_reused(), before);
}

TEST_P(FreeOrderMatmul, MultiWritesEachPartIntoItsColumnsOfASharedRow) {
  const auto [M, N, K] = GetParam();
  const int64_t N2 = N / 2 + 8, ld = N + N2 + 8;  // two parts side by side, 8 untouched columns after them
  const DeviceBuffer x = DeviceBuffer::from(randn(size_t(M * K), 3));
  const DeviceBuffer w1 = DeviceBuffer::from(to_bf16(randn(size_t(N * K), 4, 0.05f)));
  const DeviceBuffer w2 = DeviceBuffer::from(to_bf16(randn(size_t(N2 * K), 5, 0.05f)));
  const TensorView X = dev_view(x, DType::F32, {M, K});
  const TensorView ws[] = {dev_view(w1, DType::BF16, {N, K}), dev_view(w2, DType::BF16, {N2, K})};
  const DeviceBuffer fixed = poisoned(size_t(M * ld)), free = poisoned(size_t(M * ld));
  const TensorView ys_fixed[] = {columns(fixed, M, N, ld, 0), columns(fixed, M, N2, ld, N)};
  const TensorView ys_free[] = {columns(free, M, N, ld, 0), columns(free, M, N2, ld, N)};
  cuda_ops().matmul_multi(X, ws, ys_fixed);
  const uint64_t before = cuda::free_order_matmuls();
  {
    const ScopedMatmulOrder order(cuda_ops(), MatmulOrder::Free);
    cuda_ops().matmul_multi(X, ws, ys_free);
  }
  EXPECT_EQ(cuda::free_order_matmuls() - before, 2u);
  const auto ref = download(fixed, size_t(M * ld)), got = download(free, size_t(M * ld));
  double diff = 0, scale = 0;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t c = 0; c < ld; ++c) {
      const float r = ref[size_t(m * ld + c)], g = got[size_t(m * ld + c)];
      if (c >= N + N2) {
        ASSERT_TRUE(std::isnan(g)) << "row " << m << " column " << c << " is past the outputs";
        continue;
      }
      ASSERT_TRUE(std::isfinite(g)) << "row " << m << " column " << c << " was not written";
      diff = std::max(diff, std::fabs(double(g) - r));
      scale = std::max(scale, std::fabs(double(r)));
    }
  EXPECT_LT(diff / scale, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Shapes, FreeOrderMatmul,
                         ::testing::Values(FreeCase{33, 64, 64}, FreeCase{64, 136, 520}, FreeCase{100, 1000, 256},
                                           FreeCase{256, 2048, 1024}, FreeCase{240, 4104, 512}),
                         [](const auto& i) {
                           return "M" + std::to_string(i.param.M) + "_N" + std::to_string(i.param.N) + "_K" +
                                  std::to_string(i.param.K);
                         });

// The algorithm is chosen per row bucket (free_order_row_bucket): row counts of one bucket share the
// bucket's heuristic query, each M checked once (the same M again costs nothing), and every M, the
// bucket's edges included, agrees with the CPU's matmul of the same bf16 values.
TEST_F(Gpu, FreeOrderRowCountsOfOneBucketShareOneHeuristicQuery) {
  const int64_t N = 328, K = 264;  // a weight shape no other test uses: its buckets start empty here
  const std::vector<uint16_t> wb = to_bf16(randn(size_t(N * K), 31, 0.05f));
  const DeviceBuffer w = DeviceBuffer::from(wb);
  const TensorView W = dev_view(w, DType::BF16, {N, K});
  struct Bucket {
    int64_t a, b;
  };
  // The first bucket starts at the path's fewest rows (fewer never take it); the others at a power of two + 1.
  for (const Bucket bk : {Bucket{cuda::free_order_min_rows(), 64}, Bucket{65, 127}, Bucket{257, 511}}) {
    SCOPED_TRACE("rows " + std::to_string(bk.a) + " and " + std::to_string(bk.b));
    ASSERT_EQ(cuda::free_order_row_bucket(bk.a), cuda::free_order_row_bucket(bk.b));
    if (bk.a > cuda::free_order_min_rows())
      ASSERT_NE(cuda::free_order_row_bucket(bk.a), cuda::free_order_row_bucket(bk.a - 1)) << "a is the bucket's first";
    const uint64_t fallbacks_before = cuda::free_order_bucket_fallbacks();
    int call = 0;
    for (const int64_t M : {bk.a, bk.b, bk.a}) {
      SCOPED_TRACE("M " + std::to_string(M) + ", call " + std::to_string(call));
      // x holds bf16 values, so the CPU's products are the GPU's exactly: only the sums' order differs.
      std::vector<float> xf = randn(size_t(M * K), 32 + uint32_t(M));
      for (float& v : xf) v = bf16_to_f32(f32_to_bf16(v));
      std::vector<float> ref(size_t(M * N));
      cpu_ops().matmul(host_view(xf.data(), DType::F32, {M, K}), host_view(wb.data(), DType::BF16, {N, K}),
                       host_view(ref.data(), DType::F32, {M, N}));
      const DeviceBuffer x = DeviceBuffer::from(xf), y = poisoned(size_t(M * N));
      const uint64_t queries = cuda::free_order_heuristic_queries(), fallbacks = cuda::free_order_bucket_fallbacks();
      const uint64_t matmuls = cuda::free_order_matmuls();
      {
        const ScopedMatmulOrder order(cuda_ops(), MatmulOrder::Free);
        cuda_ops().matmul(dev_view(x, DType::F32, {M, K}), W, dev_view(y, DType::F32, {M, N}));
      }
      EXPECT_EQ(cuda::free_order_matmuls() - matmuls, 1u) << "the call took the cuBLASLt path";
      const uint64_t fell_back = cuda::free_order_bucket_fallbacks() - fallbacks;
      const uint64_t expected_queries = (call == 0 ? 1u : 0u) + (call == 2 ? 0u : fell_back);
      EXPECT_EQ(cuda::free_order_heuristic_queries() - queries, expected_queries)
          << "one query for the bucket, none for another M of it (none at all for an M seen before)";
      if (call == 2) EXPECT_EQ(fell_back, 0u) << "an M seen before is not checked again";
      EXPECT_LT(rel_err(download(y, size_t(M * N)), ref), 1e-5);
      ++call;
    }
    EXPECT_EQ(cuda::free_order_bucket_fallbacks(), fallbacks_before)
        << "the bucket's algorithm ran every M of the bucket (a fallback is correct but costs a query)";
  }
}

// Calls the path does not take run the row-invariant kernels even inside the scope: the same bits.
TEST_F(Gpu, FreeOrderFallsBackToTheRowInvariantKernels) {
  struct Fallback {
    const char* why;
    int64_t M, N, K;
    DType wtype;
  };
  const Fallback cases[] = {{"32 rows: the gemv kernel's range", 32, 256, 256, DType::BF16},
                            {"f32 weights", 64, 256, 256, DType::F32},
                            {"K off the 8-element grid", 64, 256, 260, DType::BF16}};
  for (const Fallback& c : cases) {
    SCOPED_TRACE(c.why);
    const DeviceBuffer x = DeviceBuffer::from(randn(size_t(c.M * c.K), 7));
    const std::vector<float> wf = randn(size_t(c.N * c.K), 8, 0.05f);
    const DeviceBuffer w = c.wtype == DType::BF16 ? DeviceBuffer::from(to_bf16(wf)) : DeviceBuffer::from(wf);
    const TensorView X = dev_view(x, DType::F32, {c.M, c.K}), W = dev_view(w, c.wtype, {c.N, c.K});
    const DeviceBuffer fixed = poisoned(size_t(c.M * c.N)), free = poisoned(size_t(c.M * c.N));
    cuda_ops().matmul(X, W, dev_view(fixed, DType::F32, {c.M, c.N}));
    const uint64_t before = cuda::free_order_matmuls();
    {
      const ScopedMatmulOrder order(cuda_ops(), MatmulOrder::Free);
      cuda_ops().matmul(X, W, dev_view(free, DType::F32, {c.M, c.N}));
    }
    EXPECT_EQ(cuda::free_order_matmuls(), before);
    const auto ref = download(fixed, size_t(c.M * c.N));
    ASSERT_TRUE(bit_equal(download(free, size_t(c.M * c.N)).data(), ref.data(), ref.size()));
  }
}

// Scopes nest and restore the order they found, also when left by an exception.
TEST_F(Gpu, ScopedMatmulOrderRestoresThePreviousOrder) {
  const Ops& ops = cuda_ops();
  EXPECT_EQ(ops.set_matmul_order(MatmulOrder::RowInvariant), MatmulOrder::RowInvariant);
  {
    const ScopedMatmulOrder outer(ops, MatmulOrder::Free);
    {
      const ScopedMatmulOrder inner(ops, MatmulOrder::RowInvariant);
      EXPECT_EQ(ops.set_matmul_order(MatmulOrder::RowInvariant), MatmulOrder::RowInvariant);
    }
    EXPECT_EQ(ops.set_matmul_order(MatmulOrder::Free), MatmulOrder::Free);
    try {
      const ScopedMatmulOrder thrown(ops, MatmulOrder::RowInvariant);
      throw Error("leaving the scope");
    } catch (const Error&) {
    }
    EXPECT_EQ(ops.set_matmul_order(MatmulOrder::Free), MatmulOrder::Free);
  }
  EXPECT_EQ(ops.set_matmul_order(MatmulOrder::RowInvariant), MatmulOrder::RowInvariant);
}

}  // namespace
}  // namespace specserve::cuda_test
