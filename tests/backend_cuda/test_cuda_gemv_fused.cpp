// The gemv kernel's fused forms for decode rows (backend/cuda/matmul_tensor_core_gemv_norm.cuh,
// kernels.h: matmul_bf16_gemv_fused), which let a decode step run without norm and add launches
// between its matmuls:
// - the norm prologue: norm_matmul_multi(x) equals rms_norm(x) then matmul_multi in the last bit, for
//   every norm block size (norm_threads(K) = 32 ... 1,024), both norm kinds, 1-4 rows, one to three
//   weights in one launch and splits S = 1 ... 8; x is left as it was;
// - the residual epilogue: matmul_accumulate(x, w, y) equals matmul into a scratch then add(y, scratch);
// - both are really taken for decode rows (the kernel entry returns true and writes y), declined for
//   the others (nothing written), and the Ops calls still give the same bits where they decline.
#include <cmath>
#include <vector>

#include "backend/cuda/cuda_memory.h"
#include "backend/cuda/kernels.h"
#include "cuda_test_util.h"

namespace specserve::cuda_test {
namespace {

namespace k = cuda::kernels;

struct NormCase {
  int64_t K;
  std::vector<int64_t> Ns;  // weights sharing x (one launch where they share a split)
};

// rms_norm(x) then matmul_multi, through the unfused Ops calls.
std::vector<std::vector<float>> plain_norm_matmul(const TensorView& X, const TensorView& NW, NormKind kind,
                                                  const std::vector<TensorView>& W, const std::vector<int64_t>& Ns) {
  const int64_t M = X.dim(0), K = X.dim(1);
  DeviceBuffer normed(size_t(M * K) * 4);
  cuda_ops().rms_norm(X, NW, kind, 1e-6f, dev_view(normed, DType::F32, {M, K}));
  std::vector<DeviceBuffer> ys;
  std::vector<TensorView> Y;
  for (int64_t N : Ns) {
    ys.push_back(poisoned(size_t(M * N)));
    Y.push_back(dev_view(ys.back(), DType::F32, {M, N}));
  }
  cuda_ops().matmul_multi(dev_view(normed, DType::F32, {M, K}), W, Y);
  std::vector<std::vector<float>> out;
  for (size_t i = 0; i < Ns.size(); ++i) out.push_back(download(ys[i], size_t(M * Ns[i])));
  return out;
}

TEST_F(Gpu, NormMatmulEqualsNormThenMatmul) {
  // K: norm blocks of 32 (48), 128 (200), 256 (1000), 512 (2048), 1024 (4096: the 8B, 5120: the 27B);
  // N: q/k/v-like triples (S = 8), gate/up pairs (S = 4), a wide single weight (lm_head, S = 1).
  const std::vector<NormCase> cases = {{48, {64, 16, 16}},       {200, {96}},           {1000, {512, 512}},
                                       {2048, {2048, 512, 512}}, {4096, {4096, 1024, 1024}},
                                       {4096, {12288, 12288}},   {5120, {6144, 1024, 1024}},
                                       {5120, {30000}}};
  for (const NormCase& c : cases) {
    const int64_t K = c.K;
    std::vector<DeviceBuffer> ws;
    std::vector<TensorView> W;
    for (int64_t N : c.Ns) {
      ws.push_back(DeviceBuffer::from(to_bf16(randn(size_t(N * K), uint32_t(7 + N + K), 0.05f))));
      W.push_back(dev_view(ws.back(), DType::BF16, {N, K}));
    }
    const DeviceBuffer nw = DeviceBuffer::from(randn(size_t(K), uint32_t(3 + K), 0.3f));
    const TensorView NW = dev_view(nw, DType::F32, {K});
    for (int64_t M : {1, 2, 3, 4}) {
      // Residual rows with a large spread, as after many layers.
      std::vector<float> xh = randn(size_t(M * K), uint32_t(M * 31 + K), 4.0f);
      const DeviceBuffer x = DeviceBuffer::from(xh);
      const TensorView X = dev_view(x, DType::F32, {M, K});
      for (NormKind kind : {NormKind::Plain, NormKind::ZeroCentred}) {
        SCOPED_TRACE(testing::Message() << "K " << K << ", M " << M << ", kind " << int(kind) << ", "
                                        << c.Ns.size() << " weights, first N " << c.Ns[0]);
        const auto want = plain_norm_matmul(X, NW, kind, W, c.Ns);
        std::vector<DeviceBuffer> ys;
        std::vector<TensorView> Y;
        for (int64_t N : c.Ns) {
          ys.push_back(poisoned(size_t(M * N)));
          Y.push_back(dev_view(ys.back(), DType::F32, {M, N}));
        }
        DeviceBuffer scratch = poisoned(size_t(M * K));
        cuda_ops().norm_matmul_multi(X, NW, kind, 1e-6f, dev_view(scratch, DType::F32, {M, K}), W, Y);
        for (size_t i = 0; i < c.Ns.size(); ++i)
          ASSERT_TRUE(bit_equal(download(ys[i], size_t(M * c.Ns[i])).data(), want[i].data(), want[i].size()))
              << "weight " << i;
        ASSERT_TRUE(bit_equal(download(x, xh.size()).data(), xh.data(), xh.size())) << "x changed";
        // The kernel normed x itself: the scratch was never written.
        for (float v : download(scratch, size_t(M * K))) ASSERT_TRUE(std::isnan(v));
      }
    }
  }
}

TEST_F(Gpu, NormMatmulFallsBackWhereTheKernelDeclines) {
  // 5 rows (the bf16-copy rows), K past the held width, f32 weights: the norm, then the matmul.
  struct Case {
    int64_t M, K;
    DType wt;
  };
  for (const Case& c : {Case{5, 4096, DType::BF16}, Case{16, 512, DType::BF16}, Case{1, 5128, DType::BF16},
                        Case{2, 256, DType::F32}}) {
    SCOPED_TRACE(testing::Message() << "M " << c.M << ", K " << c.K);
    EXPECT_FALSE(k::gemv_fused_fits(c.M, c.K, true) && c.wt == DType::BF16);
    const int64_t N = 320, M = c.M, K = c.K;
    const std::vector<float> wf = randn(size_t(N * K), 9, 0.05f);
    const DeviceBuffer w = c.wt == DType::BF16 ? DeviceBuffer::from(to_bf16(wf)) : DeviceBuffer::from(wf);
    const DeviceBuffer x = DeviceBuffer::from(randn(size_t(M * K), 5, 2.0f));
    const DeviceBuffer nw = DeviceBuffer::from(randn(size_t(K), 6, 0.3f));
    const TensorView X = dev_view(x, DType::F32, {M, K}), NW = dev_view(nw, DType::F32, {K});
    const std::vector<TensorView> W = {dev_view(w, c.wt, {N, K})};
    const auto want = plain_norm_matmul(X, NW, NormKind::Plain, W, {N});
    DeviceBuffer y = poisoned(size_t(M * N)), scratch(size_t(M * K) * 4);
    const std::vector<TensorView> Y = {dev_view(y, DType::F32, {M, N})};
    cuda_ops().norm_matmul_multi(X, NW, NormKind::Plain, 1e-6f, dev_view(scratch, DType::F32, {M, K}), W, Y);
    ASSERT_TRUE(bit_equal(download(y, size_t(M * N)).data(), want[0].data(), want[0].size()));
  }
}

TEST_F(Gpu, GemvFusedEntryTakesDecodeRowsOnly) {
  const int64_t N = 512, K = 1024;
  const DeviceBuffer w = DeviceBuffer::from(to_bf16(randn(size_t(N * K), 2, 0.05f)));
  const DeviceBuffer x = DeviceBuffer::from(randn(size_t(8 * K), 3)), nw = DeviceBuffer::from(randn(size_t(K), 4));
  for (int64_t M : {1, 4, 5, 8}) {
    DeviceBuffer y = poisoned(size_t(M * N));
    k::MatmulArgs a{.x = x.as<const float>(), .ldx = K, .w = w.data(), .w_bf16 = true, .ldw = K, .y = y.as<float>(),
                    .ldy = N, .M = M, .N = N, .K = K};
    a.norm_w = nw.as<const float>();
    const bool ran = k::matmul_bf16_gemv_fused(&a, 1, cuda::cuda_stream());
    EXPECT_EQ(ran, M <= 4) << "M " << M;
    const auto got = download(y, size_t(M * N));
    for (float v : got) ASSERT_EQ(std::isnan(v), !ran) << "M " << M;
  }
}

TEST_F(Gpu, MatmulAccumulateEqualsMatmulThenAdd) {
  // o_proj-like (S = 8), down-like (S = 4 at K 12288), a narrow one (S = 1).
  for (auto [N, K] : {std::pair<int64_t, int64_t>{4096, 4096}, {4096, 12288}, {40, 256}}) {
    const DeviceBuffer w = DeviceBuffer::from(to_bf16(randn(size_t(N * K), uint32_t(N + K), 0.05f)));
    const TensorView Wv = dev_view(w, DType::BF16, {N, K});
    for (int64_t M : {1, 3, 4, 6}) {
      SCOPED_TRACE(testing::Message() << "N " << N << ", K " << K << ", M " << M);
      const DeviceBuffer a = DeviceBuffer::from(randn(size_t(M * K), uint32_t(M + 1)));
      const std::vector<float> resid = randn(size_t(M * N), uint32_t(M + 2), 3.0f);
      const TensorView A = dev_view(a, DType::F32, {M, K});
      // matmul into a scratch, then add.
      DeviceBuffer want_y = DeviceBuffer::from(resid), scratch = poisoned(size_t(M * N));
      cuda_ops().matmul(A, Wv, dev_view(scratch, DType::F32, {M, N}));
      cuda_ops().add(dev_view(want_y, DType::F32, {M, N}), dev_view(scratch, DType::F32, {M, N}));
      const auto want = download(want_y, resid.size());
      DeviceBuffer y = DeviceBuffer::from(resid);
      const bool fused = cuda_ops().matmul_accumulate(A, Wv, dev_view(y, DType::F32, {M, N}));
      EXPECT_EQ(fused, M <= 4);
      if (!fused) {
        ASSERT_TRUE(bit_equal(download(y, resid.size()).data(), resid.data(), resid.size())) << "declined, yet wrote";
        continue;
      }
      ASSERT_TRUE(bit_equal(download(y, resid.size()).data(), want.data(), want.size()));
    }
  }
}

}  // namespace
}  // namespace specserve::cuda_test
