// cuda_ops() against cpu_ops() for the row-wise ops (matmul, norms, rope, elementwise, embedding), and
// the matmul row-invariance bit-identities on the GPU.
#include <cfloat>

#include "cuda_test_util.h"

namespace specserve::cuda_test {
namespace {

struct MatmulCase {
  int64_t M, N, K;
  bool bf16;
};

// y = x · wᵀ in double from the exact operand values (bf16 weights as their f32 values).
std::vector<float> matmul_ref(const std::vector<float>& x, const std::vector<float>& w, int64_t M, int64_t N,
                              int64_t K) {
  std::vector<float> y(size_t(M * N));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += double(x[m * K + k]) * double(w[n * K + k]);
      y[m * N + n] = float(s);
    }
  return y;
}

class Matmul : public Gpu, public ::testing::WithParamInterface<MatmulCase> {};

TEST_P(Matmul, AgreesWithCpuAndReference) {
  const auto [M, N, K, bf16] = GetParam();
  auto x = randn(size_t(M * K), 1 + uint32_t(K)), w = randn(size_t(N * K), 2 + uint32_t(N), 0.05f);
  std::vector<uint16_t> wb;
  if (bf16) {
    wb = to_bf16(w);
    convert_to_f32(wb.data(), DType::BF16, w.data(), w.size());  // the reference sees the bf16 values
  }
  const DType wt = bf16 ? DType::BF16 : DType::F32;
  const void* wh = bf16 ? static_cast<const void*>(wb.data()) : w.data();
  std::vector<float> y_cpu(size_t(M * N));
  cpu_ops().matmul(host_view(x.data(), DType::F32, {M, K}), host_view(wh, wt, {N, K}),
                   host_view(y_cpu.data(), DType::F32, {M, N}));

  DeviceBuffer dx = DeviceBuffer::from(x);
  DeviceBuffer dw = bf16 ? DeviceBuffer::from(wb) : DeviceBuffer::from(w);
  DeviceBuffer dy = poisoned(size_t(M * N));
  cuda_ops().matmul(dev_view(dx, DType::F32, {M, K}), dev_view(dw, wt, {N, K}), dev_view(dy, DType::F32, {M, N}));
  auto y = download(dy, size_t(M * N));

  // bf16 weights: the tensor-core kernel rounds x to bf16 (as the CPU's AVX512-BF16 kernel does), so the
  // exact reference sees the rounded x; the CPU on other machines keeps x in f32: looser there.
  std::vector<float> x_ref = x;
  if (bf16)
    for (auto& v : x_ref) v = bf16_to_f32(f32_to_bf16(v));
  EXPECT_LT(rel_err(y, matmul_ref(x_ref, w, M, N, K)), bf16 ? 2e-4 : 1e-5);
  EXPECT_LT(rel_err(y, y_cpu), bf16 ? 1e-2 : 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Shapes, Matmul,
                         ::testing::Values(MatmulCase{1, 3072, 512, true}, MatmulCase{1, 512, 2048, false},
                                           MatmulCase{3, 1024, 2048, true}, MatmulCase{7, 512, 512, false},
                                           MatmulCase{64, 1000, 512, true}, MatmulCase{100, 384, 1024, false},
                                           MatmulCase{5, 300, 77, true}, MatmulCase{9, 33, 1001, false},
                                           MatmulCase{1, 17, 3, true}),
                         [](const ::testing::TestParamInfo<MatmulCase>& i) {
                           const auto& c = i.param;
                           return "M" + std::to_string(c.M) + "_N" + std::to_string(c.N) + "_K" + std::to_string(c.K) +
                                  (c.bf16 ? "_bf16" : "_f32");
                         });

// A row's bits do not depend on the batch: row m alone equals row m of batches of M = 2, 8, 64, 256
// (the whole x buffer computed in one call, then prefixes of it).
void check_row_invariance(int64_t N, int64_t K, bool bf16) {
  const int64_t kMax = 256;
  auto x = randn(size_t(kMax * K), 7), w = randn(size_t(N * K), 8, 0.05f);
  const DType wt = bf16 ? DType::BF16 : DType::F32;
  DeviceBuffer dx = DeviceBuffer::from(x);
  DeviceBuffer dw = bf16 ? DeviceBuffer::from(to_bf16(w)) : DeviceBuffer::from(w);
  const TensorView X = dev_view(dx, DType::F32, {kMax, K}), W = dev_view(dw, wt, {N, K});
  // Each row alone, also from its own freshly allocated buffer.
  std::vector<float> alone(size_t(kMax * N));
  for (int64_t m = 0; m < kMax; ++m) {
    DeviceBuffer y1 = poisoned(size_t(N));
    if (m % 37 == 0) {
      // From its own buffer, one float past a 16-byte boundary: the scalar-load path, same bits.
      DeviceBuffer x1(size_t(K + 1) * 4);
      x1.upload(x.data() + m * K, size_t(K) * 4, 4);
      TensorView X1 = TensorView::contiguous(x1.as<float>() + 1, DType::F32, {1, K}, Device::CUDA);
      cuda_ops().matmul(X1, W, dev_view(y1, DType::F32, {1, N}));
    } else {
      cuda_ops().matmul(X.rows(m, m + 1), W, dev_view(y1, DType::F32, {1, N}));
    }
    y1.download(alone.data() + m * N, size_t(N) * 4);
  }
  for (int64_t M : {2, 8, 64, 256}) {
    DeviceBuffer y = poisoned(size_t(M * N));
    cuda_ops().matmul(X.rows(0, M), W, dev_view(y, DType::F32, {M, N}));
    auto got = download(y, size_t(M * N));
    for (int64_t m = 0; m < M; ++m)
      ASSERT_TRUE(bit_equal(got.data() + m * N, alone.data() + m * N, size_t(N)))
          << "row " << m << " of M=" << M << " (N " << N << ", K " << K << (bf16 ? ", bf16)" : ", f32)");
  }
  // A batch that starts elsewhere (rows 100..163) too.
  DeviceBuffer y = poisoned(size_t(64 * N));
  cuda_ops().matmul(X.rows(100, 164), W, dev_view(y, DType::F32, {64, N}));
  auto got = download(y, size_t(64 * N));
  EXPECT_TRUE(bit_equal(got.data(), alone.data() + 100 * N, size_t(64 * N)));
}

TEST_F(Gpu, MatmulRowInvarianceBf16) { check_row_invariance(3072, 2048, true); }
TEST_F(Gpu, MatmulRowInvarianceF32) { check_row_invariance(1024, 2048, false); }
TEST_F(Gpu, MatmulRowInvarianceOddK) { check_row_invariance(257, 1001, true); }

TEST_F(Gpu, MatmulMultiEqualsSeparateMatmuls) {
  const int64_t M = 5, K = 512;
  auto x = randn(size_t(M * K), 21), wq = randn(size_t(512 * K), 22, 0.05f), wk = randn(size_t(256 * K), 23, 0.05f);
  DeviceBuffer dx = DeviceBuffer::from(x), dq = DeviceBuffer::from(to_bf16(wq)), dk = DeviceBuffer::from(to_bf16(wk));
  DeviceBuffer yq = poisoned(size_t(M * 512)), yk = poisoned(size_t(M * 256));
  DeviceBuffer sq = poisoned(size_t(M * 512)), sk = poisoned(size_t(M * 256));
  const TensorView X = dev_view(dx, DType::F32, {M, K});
  TensorView ws[2] = {dev_view(dq, DType::BF16, {512, K}), dev_view(dk, DType::BF16, {256, K})};
  TensorView ys[2] = {dev_view(yq, DType::F32, {M, 512}), dev_view(yk, DType::F32, {M, 256})};
  cuda_ops().matmul_multi(X, ws, ys);
  cuda_ops().matmul(X, ws[0], dev_view(sq, DType::F32, {M, 512}));
  cuda_ops().matmul(X, ws[1], dev_view(sk, DType::F32, {M, 256}));
  auto a = download(yq, size_t(M * 512)), b = download(sq, size_t(M * 512));
  auto c = download(yk, size_t(M * 256)), d = download(sk, size_t(M * 256));
  EXPECT_TRUE(bit_equal(a.data(), b.data(), a.size()));
  EXPECT_TRUE(bit_equal(c.data(), d.data(), c.size()));
}

TEST_F(Gpu, RejectsHostOperands) {
  std::vector<float> x(8), w(8), y(1);
  EXPECT_THROW(cuda_ops().matmul(host_view(x.data(), DType::F32, {1, 8}), host_view(w.data(), DType::F32, {1, 8}),
                                 host_view(y.data(), DType::F32, {1, 1})),
               Error);
}

TEST_F(Gpu, EmbeddingIsExact) {
  const int64_t V = 1000, H = 512;
  std::vector<int32_t> ids = {3, 999, 0, 3, 517, 42, 42};
  const int64_t n = int64_t(ids.size());
  auto table = randn(size_t(V * H), 31);
  auto tb = to_bf16(table);
  for (bool bf16 : {false, true}) {
    const DType t = bf16 ? DType::BF16 : DType::F32;
    const void* th = bf16 ? static_cast<const void*>(tb.data()) : table.data();
    std::vector<float> want(size_t(n * H));
    cpu_ops().embedding(host_view(th, t, {V, H}), ids, host_view(want.data(), DType::F32, {n, H}));
    DeviceBuffer dt = bf16 ? DeviceBuffer::from(tb) : DeviceBuffer::from(table);
    DeviceBuffer out = poisoned(size_t(n * H));
    cuda_ops().embedding(dev_view(dt, t, {V, H}), ids, dev_view(out, DType::F32, {n, H}));
    auto got = download(out, size_t(n * H));
    EXPECT_TRUE(bit_equal(got.data(), want.data(), got.size())) << (bf16 ? "bf16" : "f32");
  }
  std::vector<int32_t> bad = {1000};
  DeviceBuffer dt = DeviceBuffer::from(table), out = poisoned(size_t(H));
  EXPECT_THROW(cuda_ops().embedding(dev_view(dt, DType::F32, {V, H}), bad, dev_view(out, DType::F32, {1, H})), Error);
}

TEST_F(Gpu, RmsNormFlavoursAgreeWithCpu) {
  for (int64_t d : {512, 128, 19}) {
    const int64_t n = 37;
    auto x = randn(size_t(n * d), 41 + uint32_t(d)), w = randn(size_t(d), 42, 0.3f), z = randn(size_t(n * d), 43);
    DeviceBuffer dx = DeviceBuffer::from(x), dw = DeviceBuffer::from(w), dz = DeviceBuffer::from(z);
    const TensorView X = dev_view(dx, DType::F32, {n, d}), Wt = dev_view(dw, DType::F32, {d}),
                     Z = dev_view(dz, DType::F32, {n, d});
    for (NormKind kind : {NormKind::Plain, NormKind::ZeroCentred}) {
      std::vector<float> want(x.size());
      cpu_ops().rms_norm(host_view(x.data(), DType::F32, {n, d}), host_view(w.data(), DType::F32, {d}), kind, 1e-6f,
                         host_view(want.data(), DType::F32, {n, d}));
      DeviceBuffer y = poisoned(x.size());
      cuda_ops().rms_norm(X, Wt, kind, 1e-6f, dev_view(y, DType::F32, {n, d}));
      EXPECT_LT(rel_err(download(y, x.size()), want), 1e-6) << "d " << d;
      // In place (y aliases x).
      DeviceBuffer xi = DeviceBuffer::from(x);
      cuda_ops().rms_norm(dev_view(xi, DType::F32, {n, d}), Wt, kind, 1e-6f, dev_view(xi, DType::F32, {n, d}));
      EXPECT_TRUE(bit_equal(download(xi, x.size()).data(), download(y, x.size()).data(), x.size()));
    }
    std::vector<float> want(x.size());
    cpu_ops().rms_norm_gated(host_view(x.data(), DType::F32, {n, d}), host_view(z.data(), DType::F32, {n, d}),
                             host_view(w.data(), DType::F32, {d}), 1e-6f, host_view(want.data(), DType::F32, {n, d}));
    DeviceBuffer y = poisoned(x.size());
    cuda_ops().rms_norm_gated(X, Z, Wt, 1e-6f, dev_view(y, DType::F32, {n, d}));
    EXPECT_LT(rel_err(download(y, x.size()), want), 1e-6) << "gated, d " << d;
  }
}

TEST_F(Gpu, NormRowAloneEqualsRowInBatch) {
  const int64_t n = 64, d = 512;
  auto x = randn(size_t(n * d), 51), w = randn(size_t(d), 52, 0.3f);
  DeviceBuffer dx = DeviceBuffer::from(x), dw = DeviceBuffer::from(w), all = poisoned(x.size()),
               one = poisoned(size_t(d));
  const TensorView X = dev_view(dx, DType::F32, {n, d});
  cuda_ops().rms_norm(X, dev_view(dw, DType::F32, {d}), NormKind::ZeroCentred, 1e-6f,
                      dev_view(all, DType::F32, {n, d}));
  cuda_ops().rms_norm(X.rows(17, 18), dev_view(dw, DType::F32, {d}), NormKind::ZeroCentred, 1e-6f,
                      dev_view(one, DType::F32, {1, d}));
  EXPECT_TRUE(bit_equal(download(all, x.size()).data() + 17 * d, download(one, size_t(d)).data(), size_t(d)));
}

// The fused residual add + norm gives the bits of add() then rms_norm(), for both flavours, one row
// (the decode shape: 1024 threads) and many.
TEST_F(Gpu, AddRmsNormEqualsAddThenNorm) {
  for (const auto& [n, d] : {std::pair<int64_t, int64_t>{1, 4096}, {9, 5120}, {33, 96}}) {
    for (NormKind kind : {NormKind::Plain, NormKind::ZeroCentred}) {
      auto x = randn(size_t(n * d), 53), y = randn(size_t(n * d), 54), w = randn(size_t(d), 55, 0.3f);
      DeviceBuffer x1 = DeviceBuffer::from(x), x2 = DeviceBuffer::from(x), dy = DeviceBuffer::from(y),
                   dw = DeviceBuffer::from(w), fused = poisoned(x.size()), apart = poisoned(x.size());
      const TensorView W = dev_view(dw, DType::F32, {d}), Y = dev_view(dy, DType::F32, {n, d});
      cuda_ops().add_rms_norm(dev_view(x1, DType::F32, {n, d}), Y, W, kind, 1e-6f, dev_view(fused, DType::F32, {n, d}));
      cuda_ops().add(dev_view(x2, DType::F32, {n, d}), Y);
      cuda_ops().rms_norm(dev_view(x2, DType::F32, {n, d}), W, kind, 1e-6f, dev_view(apart, DType::F32, {n, d}));
      EXPECT_TRUE(bit_equal(download(x1, x.size()).data(), download(x2, x.size()).data(), x.size())) << n << "x" << d;
      EXPECT_TRUE(bit_equal(download(fused, x.size()).data(), download(apart, x.size()).data(), x.size()))
          << n << "x" << d;
    }
  }
}

TEST_F(Gpu, RopeAgreesWithCpu) {
  const int heads = 4, hd = 128;
  const int64_t R = 29;
  std::vector<int32_t> pos(R);
  std::mt19937 rng(61);
  for (auto& p : pos) p = int32_t(rng() % 40000);
  pos[0] = 0;
  for (int rot : {128, 64}) {
    auto x = randn(size_t(R * heads * hd), 62 + uint32_t(rot));
    auto want = x;
    cpu_ops().rope(host_view(want.data(), DType::F32, {R, heads * hd}), heads, hd, rot, 1e6, pos);
    DeviceBuffer dx = DeviceBuffer::from(x);
    cuda_ops().rope(dev_view(dx, DType::F32, {R, heads * hd}), heads, hd, rot, 1e6, pos);
    auto got = download(dx, x.size());
    EXPECT_LT(rel_err(got, want), 2e-6) << "rot " << rot;
    // The pass-through dims are untouched.
    for (int64_t r = 0; r < R; ++r)
      for (int h = 0; h < heads; ++h)
        for (int i = rot; i < hd; ++i) ASSERT_EQ(got[(r * heads + h) * hd + i], x[(r * heads + h) * hd + i]);
  }
}

TEST_F(Gpu, ElementwiseAgreeWithCpu) {
  const int64_t n = 3 * 4096 + 17;
  auto a = randn(size_t(n), 71, 3.0f), b = randn(size_t(n), 72, 3.0f);
  DeviceBuffer da = DeviceBuffer::from(a), db = DeviceBuffer::from(b);
  const TensorView A = dev_view(da, DType::F32, {n}), B = dev_view(db, DType::F32, {n});
  {
    std::vector<float> want(a.size());
    cpu_ops().swiglu(host_view(a.data(), DType::F32, {n}), host_view(b.data(), DType::F32, {n}),
                     host_view(want.data(), DType::F32, {n}));
    DeviceBuffer out = poisoned(a.size());
    cuda_ops().swiglu(A, B, dev_view(out, DType::F32, {n}));
    EXPECT_LT(rel_err(download(out, a.size()), want), 1e-6);
  }
  {
    auto want = a;
    cpu_ops().add(host_view(want.data(), DType::F32, {n}), host_view(b.data(), DType::F32, {n}));
    DeviceBuffer x = DeviceBuffer::from(a);
    cuda_ops().add(dev_view(x, DType::F32, {n}), B);
    auto got = download(x, a.size());
    EXPECT_TRUE(bit_equal(got.data(), want.data(), got.size()));
  }
  {
    auto want = a;
    cpu_ops().mul_sigmoid(host_view(want.data(), DType::F32, {n}), host_view(b.data(), DType::F32, {n}));
    DeviceBuffer x = DeviceBuffer::from(a);
    cuda_ops().mul_sigmoid(dev_view(x, DType::F32, {n}), B);
    EXPECT_LT(rel_err(download(x, a.size()), want), 1e-6);
  }
}

}  // namespace
}  // namespace specserve::cuda_test

namespace specserve::cuda_test {
namespace {

// argmax on the device equals the CPU's on rows with ties, NaN, +-inf, all-masked rows and a column
// limit below the row width (the padded vocabulary).
TEST_F(Gpu, ArgmaxAgreesWithCpu) {
  const int64_t R = 37, W = 151936, n = 151900;
  std::vector<float> x = randn(size_t(R * W), 11);
  for (auto& v : x) v = std::round(v * 8) / 8;  // ties
  x[5] = NAN;
  x[size_t(1 * W + 77)] = INFINITY;
  x[size_t(1 * W + 78)] = FLT_MAX;
  x[size_t(2 * W + n + 3)] = 1e30f;                                                // past n: ignored
  for (int64_t i = 0; i < W; ++i) x[size_t(3 * W + i)] = i % 2 ? -INFINITY : NAN;  // nothing finite
  x[size_t(4 * W + W - 1 - 36)] = 99.0f;  // the maximum in the last columns before n
  x[size_t(6 * W + 140000)] = 50.0f;      // a tie between two of the device's parts: the lower index
  x[size_t(6 * W + 10)] = 50.0f;
  x[size_t(7 * W + 4095)] = 60.0f;  // the same value at the end of one part and the start of the next
  x[size_t(7 * W + 4096)] = 60.0f;
  std::vector<int32_t> cpu(static_cast<size_t>(R)), gpu(static_cast<size_t>(R), 12345);
  cpu_ops().argmax(host_view(x.data(), DType::F32, {R, W}), n, cpu);
  DeviceBuffer d = DeviceBuffer::from(x);
  cuda_ops().argmax(dev_view(d, DType::F32, {R, W}), n, gpu);
  EXPECT_EQ(gpu, cpu);
  EXPECT_EQ(cpu[3], -1);
  EXPECT_EQ(cpu[1], 77);
  EXPECT_EQ(cpu[6], 10);
  EXPECT_EQ(cpu[7], 4095);
  // Short rows (one part) and a width just past a part.
  for (int64_t m : {int64_t{1}, int64_t{100}, int64_t{4097}}) {
    cpu_ops().argmax(host_view(x.data(), DType::F32, {R, W}), m, cpu);
    cuda_ops().argmax(dev_view(d, DType::F32, {R, W}), m, gpu);
    EXPECT_EQ(gpu, cpu) << m;
  }
}

}  // namespace
}  // namespace specserve::cuda_test
