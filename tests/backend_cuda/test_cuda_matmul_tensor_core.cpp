// The bf16 tensor-core matmul (backend/cuda/matmul_tensor_core.cu,
// matmul_tensor_core_gemv.cu: the launcher's default for up to 32 rows, and every kernel forced) on the
// GPU: agreement with cpu_ops() and with the contract's reference (x rounded to bf16), row invariance in
// the last bit (a row alone equals the row in batches, in every tile shape, from strided and misaligned
// views), and matmul_multi equal to separate matmuls. The index code is also emulated on the host
// (test_cuda_matmul_tc_emulation.cpp).
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <type_traits>

#include "backend/cuda/cuda_memory.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/matmul_tensor_core.cuh"
#include "backend/cuda/matmul_tensor_core_xb.cuh"
#include "cuda_test_util.h"
#include "tc_reference.h"

namespace specserve::cuda_test {
namespace {

namespace tc = cuda::tc;

// ---- on the GPU ------------------------------------------------------------------------------------

// A [rows, cols] view with row pitch ld, `offset` elements past the buffer's (aligned) start.
TensorView strided(void* base, DType t, int64_t offset, int64_t rows, int64_t cols, int64_t ld, Device d) {
  TensorView v = TensorView::contiguous(static_cast<char*>(base) + offset * int64_t(dtype_size(t)), t, {rows, cols}, d);
  v.strides[0] = ld;
  return v;
}

struct TcCase {
  int64_t M, N, K;
  int64_t pad_x = 0, pad_w = 0, pad_y = 0;  // row pitch = width + pad
  int64_t x_off = 0;                        // x starts this many floats past an aligned address
};

class TcMatmul : public Gpu, public ::testing::WithParamInterface<TcCase> {};

// Against cpu_ops() (which on AVX512-BF16 machines rounds x to bf16 once, as the contract does, and
// elsewhere multiplies the f32 x: both within 1e-2) and against the contract's own reference (x
// rounded to bf16, exact products; only the f32 accumulation differs). Outputs start as NaN; the
// padding between rows must stay NaN.
TEST_P(TcMatmul, AgreesWithCpuAndContract) {
  const TcCase c = GetParam();
  const int64_t M = c.M, N = c.N, K = c.K, ldx = K + c.pad_x, ldw = K + c.pad_w, ldy = N + c.pad_y;
  auto x = randn(size_t((M - 1) * ldx + K + c.x_off), uint32_t(3 + K + M));
  auto w = to_bf16(randn(size_t((N - 1) * ldw + K), uint32_t(5 + N), 0.05f));
  std::vector<float> y_cpu(size_t(M * N));
  cpu_ops().matmul(strided(x.data(), DType::F32, c.x_off, M, K, ldx, Device::CPU),
                   strided(w.data(), DType::BF16, 0, N, K, ldw, Device::CPU),
                   host_view(y_cpu.data(), DType::F32, {M, N}));
  DeviceBuffer dx = DeviceBuffer::from(x), dw = DeviceBuffer::from(w);
  const size_t ny = size_t((M - 1) * ldy + N);
  DeviceBuffer dy = poisoned(ny);
  cuda_ops().matmul(strided(dx.data(), DType::F32, c.x_off, M, K, ldx, Device::CUDA),
                    strided(dw.data(), DType::BF16, 0, N, K, ldw, Device::CUDA),
                    strided(dy.data(), DType::F32, 0, M, N, ldy, Device::CUDA));
  const auto got = download(dy, ny);
  std::vector<float> y(size_t(M * N));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < ldy && size_t(m * ldy + n) < ny; ++n) {
      if (n < N)
        y[size_t(m * N + n)] = got[size_t(m * ldy + n)];
      else
        ASSERT_TRUE(std::isnan(got[size_t(m * ldy + n)])) << "wrote the padding at row " << m << ", column " << n;
    }
  EXPECT_LT(rel_err(y, y_cpu), 1e-2);
  EXPECT_LT(rel_err(y, reference(x.data() + c.x_off, ldx, w.data(), ldw, M, N, K)), 2e-4);
}

std::vector<TcCase> tc_cases() {
  std::vector<TcCase> v;
  for (int64_t M : {1, 2, 3, 8, 16, 17, 32, 48, 64, 128, 255, 256, 257, 1024})
    for (auto [N, K] : {std::pair<int64_t, int64_t>{512, 1024}, {257, 1001}, {1001, 3}}) v.push_back({M, N, K});
  v.push_back({5, 300, 77, 3, 5, 7, 1});        // strided and misaligned: scalar loads
  v.push_back({64, 1000, 512, 4, 8, 8, 0});     // strided, aligned: 16-byte loads
  v.push_back({300, 129, 4096, 0, 0, 3, 0});    // long K, odd N
  v.push_back({1, 4096, 4096, 0, 0, 0, 0});     // a decode shape
  v.push_back({33, 77, 2056, 12, 8, 1, 0});     // K % 16 == 8
  v.push_back({1024, 2048, 512, 0, 0, 0, 0});   // enough 128 x 128 tiles for the prefill shape
  v.push_back({1, 4096, 12288, 0, 0, 0, 0});    // S = 8, long slices (many x windows)
  v.push_back({16, 5120, 5120, 0, 0, 0, 0});    // S = 8, 40 chunks per slice
  v.push_back({7, 24576, 1000, 0, 0, 0, 0});    // S = 1 (wide), K % 16 == 8
  v.push_back({200, 512, 4104, 0, 0, 0, 0});    // tiled, S = 8 with a short last slice
  v.push_back({64, 4096, 4096, 0, 0, 0, 0});    // verify shapes: 64 x 128 tiles, S = 8
  v.push_back({256, 4096, 4096, 0, 0, 0, 0});   // 128 x 128 tiles, S = 8
  v.push_back({32, 24576, 1001, 0, 0, 0, 0});   // 32 x 128 tiles, S = 2, odd K
  v.push_back({130, 33000, 1001, 5, 3, 1, 0});  // S = 1, odd K, padded rows
  return v;
}

INSTANTIATE_TEST_SUITE_P(Shapes, TcMatmul, ::testing::ValuesIn(tc_cases()),
                         [](const ::testing::TestParamInfo<TcCase>& i) {
                           const TcCase& c = i.param;
                           const bool strided = c.pad_x || c.pad_w || c.pad_y || c.x_off;
                           return "M" + std::to_string(c.M) + "_N" + std::to_string(c.N) + "_K" + std::to_string(c.K) +
                                  (strided ? "_strided" + std::to_string(i.index) : "");
                         });

// Row invariance in the last bit: every row computed alone (M = 1, the gemv kernel) equals the
// same row inside batches of unrelated rows of M = 2 .. 1024 (batches starting at different rows, so
// a row sits at different fragment positions), in every tile shape and the streaming (gemv) kernel forced,
// and from a misaligned, oddly pitched copy of x or of w (the scalar load paths). Most shapes here
// split K (k_split: S = 2 or 8, K not a multiple of 16 * S), so the slices' fixed-order sum is checked
// too.
void check_row_invariance(int64_t N, int64_t K) {
  const int64_t kRows = 1024 + 16;
  auto x = randn(size_t(kRows * K), 7 + uint32_t(K)), wf = randn(size_t(N * K), 8 + uint32_t(N), 0.05f);
  const auto w = to_bf16(wf);
  DeviceBuffer dx = DeviceBuffer::from(x), dw = DeviceBuffer::from(w);
  // The same x with pitch K + 5, one float past an aligned start; the same w with pitch K + 3, one
  // element past an aligned start.
  std::vector<float> x2(size_t(kRows * (K + 5) + 1));
  for (int64_t m = 0; m < kRows; ++m) std::copy_n(x.data() + m * K, K, x2.data() + 1 + m * (K + 5));
  std::vector<uint16_t> w2(size_t(N * (K + 3) + 1));
  for (int64_t n = 0; n < N; ++n) std::copy_n(w.data() + n * K, K, w2.data() + 1 + n * (K + 3));
  DeviceBuffer dx2 = DeviceBuffer::from(x2), dw2 = DeviceBuffer::from(w2);
  const TensorView X = dev_view(dx, DType::F32, {kRows, K}), W = dev_view(dw, DType::BF16, {N, K});
  const TensorView X2 = strided(dx2.data(), DType::F32, 1, kRows, K, K + 5, Device::CUDA);
  const TensorView W2 = strided(dw2.data(), DType::BF16, 1, N, K, K + 3, Device::CUDA);
  const std::string where = " (N " + std::to_string(N) + ", K " + std::to_string(K) + ")";

  std::vector<float> alone(size_t(kRows * N));
  for (int64_t m = 0; m < kRows; ++m) {
    DeviceBuffer y1 = poisoned(size_t(N));
    cuda_ops().matmul(m % 37 == 0 ? X2.rows(m, m + 1) : X.rows(m, m + 1), m % 41 == 0 ? W2 : W,
                      dev_view(y1, DType::F32, {1, N}));
    y1.download(alone.data() + m * N, size_t(N) * 4);
  }
  for (float v : alone) ASSERT_TRUE(std::isfinite(v)) << where;
  auto expect_rows = [&](const DeviceBuffer& y, int64_t first, int64_t M, const std::string& what) {
    const auto got = download(y, size_t(M * N));
    for (int64_t m = 0; m < M; ++m)
      ASSERT_TRUE(bit_equal(got.data() + m * N, alone.data() + (first + m) * N, size_t(N)))
          << "row " << first + m << " at " << m << " of " << what << where;
  };
  for (int64_t M : {2, 8, 16, 17, 24, 32, 48, 64, 100, 128, 256, 300, 1024}) {
    for (int64_t first : {int64_t{0}, M % 13 + 1}) {
      DeviceBuffer y = poisoned(size_t(M * N));
      cuda_ops().matmul(X.rows(first, first + M), W, dev_view(y, DType::F32, {M, N}));
      expect_rows(y, first, M, "M=" + std::to_string(M));
    }
  }
  for (int64_t M : {16, 17, 64, 300}) {
    DeviceBuffer y = poisoned(size_t(M * N));
    cuda_ops().matmul(X2.rows(3, 3 + M), W2, dev_view(y, DType::F32, {M, N}));
    expect_rows(y, 3, M, "the misaligned copies, M=" + std::to_string(M));
  }
  // Every tile shape, whichever the launcher would pick.
  for (int tile = 0; tile < tc::kTileKinds; ++tile)
    for (int64_t M : {1, 5, 40, 300}) {
      DeviceBuffer y = poisoned(size_t(M * N));
      const cuda::kernels::MatmulArgs a{.x = dx.as<const float>() + 7 * K,
                                        .ldx = K,
                                        .w = dw.data(),
                                        .w_bf16 = true,
                                        .ldw = K,
                                        .y = y.as<float>(),
                                        .ldy = N,
                                        .M = M,
                                        .N = N,
                                        .K = K};
      cuda::kernels::matmul_bf16_tensor_core(a, cuda::cuda_stream(), tile);
      expect_rows(y, 7, M, "tile " + std::to_string(tile) + ", M=" + std::to_string(M));
    }
}

TEST_F(Gpu, TcRowInvarianceN3072K2048) { check_row_invariance(3072, 2048); }
TEST_F(Gpu, TcRowInvarianceOddK) { check_row_invariance(257, 1001); }
TEST_F(Gpu, TcRowInvarianceN1000K4104) { check_row_invariance(1000, 4104); }
TEST_F(Gpu, TcRowInvarianceTinyK) { check_row_invariance(130, 3); }
TEST_F(Gpu, TcRowInvarianceN64K12288) { check_row_invariance(64, 12288); }      // S = 8, 48 windows a slice
TEST_F(Gpu, TcRowInvarianceN3000K496) { check_row_invariance(3000, 496); }      // S = 1: no cluster
TEST_F(Gpu, TcRowInvarianceN33000K1001) { check_row_invariance(33000, 1001); }  // S = 1, odd K, wide
TEST_F(Gpu, TcRowInvarianceN24576K1001) { check_row_invariance(24576, 1001); }  // S = 2, odd K, wide
TEST_F(Gpu, TcRowInvarianceN4096K4096) { check_row_invariance(4096, 4096); }    // S = 8: q/o_proj

// Every kernel and tile shape on data built to expose a different accumulation: bf16 values with
// exponents spread over 2^-40 .. 2^40 (partial sums that cancel, shifts past the mantissa), exact
// zeros of both signs, subnormal-range and tied magnitudes. The wgmma kernel's k16 step must give each
// element the bits of mma.sync's (matmul_wgmma.cuh), so every tile kind's output equals the mma.sync
// 128 x 128 tile's and each row equals the row computed alone (the gemv kernel), bit for bit.
TEST_F(Gpu, TcEveryTileKindBitEqualOnAdversarialData) {
  std::mt19937 rng(99);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-40, 40), pick(0, 15);
  auto value = [&]() {
    const int kind = pick(rng);
    if (kind == 0) return 0.0f;
    if (kind == 1) return -0.0f;
    if (kind == 2) return std::ldexp(nd(rng), -128);            // bf16 subnormal range
    if (kind == 3) return std::ldexp(1.0f, exponent(rng) / 4);  // powers of two: ties
    return std::ldexp(nd(rng), exponent(rng));
  };
  for (auto [M, N, K] : {std::array<int64_t, 3>{200, 384, 2056}, {64, 4096, 1000}, {300, 520, 48}}) {
    std::vector<float> x(size_t(M * K)), wf(size_t(N * K));
    for (float& v : x) v = value();
    for (float& v : wf) v = value();
    // A row of negative zeros and a row of zeros times negative weights: sums that are -0 or +0.
    for (int64_t k = 0; k < K; ++k) x[size_t(3 * K + k)] = -0.0f;
    const auto w = to_bf16(wf);
    DeviceBuffer dx = DeviceBuffer::from(x), dw = DeviceBuffer::from(w);
    auto run = [&](int tile, int64_t first, int64_t rows) {
      DeviceBuffer y = poisoned(size_t(rows * N));
      const cuda::kernels::MatmulArgs a{.x = dx.as<const float>() + first * K,
                                        .ldx = K,
                                        .w = dw.data(),
                                        .w_bf16 = true,
                                        .ldw = K,
                                        .y = y.as<float>(),
                                        .ldy = N,
                                        .M = rows,
                                        .N = N,
                                        .K = K};
      cuda::kernels::matmul_bf16_tensor_core(a, cuda::cuda_stream(), tile);
      return download(y, size_t(rows * N));
    };
    const std::string where = "M " + std::to_string(M) + ", N " + std::to_string(N) + ", K " + std::to_string(K);
    const auto base = run(static_cast<int>(tc::TileKind::M128), 0, M);
    for (int tile = 0; tile < tc::kTileKinds; ++tile) {
      const auto got = run(tile, 0, M);
      EXPECT_TRUE(bit_equal(got.data(), base.data(), got.size())) << "tile " << tile << ", " << where;
    }
    const auto by_default = run(-1, 0, M);
    EXPECT_TRUE(bit_equal(by_default.data(), base.data(), base.size())) << "the launcher's choice, " << where;
    for (int64_t m : {int64_t{0}, int64_t{3}, M - 1}) {
      const auto alone = run(-1, m, 1);
      EXPECT_TRUE(bit_equal(alone.data(), base.data() + m * N, size_t(N))) << "row " << m << " alone, " << where;
    }
  }
}

// matmul_multi launches the weights that share a K split together (up to 4 per launch, for M <= 16):
// here 0, 1, 2 and 4 share S = 2 and 3 (512 column blocks) has S = 1, so M = 1, 16, 24 and 32 make
// one 4-segment launch and one single launch (24 and 32: two 16-row blocks per column block); M = 300
// runs each alone. Bits equal the lone matmul's.
TEST_F(Gpu, TcMatmulMultiEqualsSeparateMatmuls) {
  const int64_t K = 1024;
  constexpr int kWeights = 5;
  const int64_t widths[kWeights] = {512, 256, 264, 32768, 72};
  for (int64_t M : {1, 16, 24, 32, 300}) {
    auto x = randn(size_t(M * K), 21 + uint32_t(M));
    DeviceBuffer dx = DeviceBuffer::from(x);
    std::vector<DeviceBuffer> dws, multi, single;
    std::vector<TensorView> ws, ys;
    for (int i = 0; i < kWeights; ++i) {
      dws.push_back(DeviceBuffer::from(to_bf16(randn(size_t(widths[i] * K), 22 + uint32_t(i), 0.05f))));
      multi.push_back(poisoned(size_t(M * widths[i])));
      single.push_back(poisoned(size_t(M * widths[i])));
      ws.push_back(dev_view(dws.back(), DType::BF16, {widths[i], K}));
      ys.push_back(dev_view(multi.back(), DType::F32, {M, widths[i]}));
    }
    const TensorView X = dev_view(dx, DType::F32, {M, K});
    cuda_ops().matmul_multi(X, ws, ys);
    for (int i = 0; i < kWeights; ++i) {
      cuda_ops().matmul(X, ws[size_t(i)], dev_view(single[size_t(i)], DType::F32, {M, widths[i]}));
      const auto a = download(multi[size_t(i)], size_t(M * widths[i]));
      const auto b = download(single[size_t(i)], size_t(M * widths[i]));
      for (float v : a) ASSERT_TRUE(std::isfinite(v));
      EXPECT_TRUE(bit_equal(a.data(), b.data(), a.size())) << "weight " << i << ", M " << M;
    }
  }
}

// The gemv kernel's stages per warp (2-5, chosen per launch by its CTA count) and its early weight
// loads (the first tiles' weights before the wait for the previous kernel) change only the timing:
// every combination gives the bits of 2 stages without early loads, on whole and partial tiles
// (odd K, N not a multiple of 16), misaligned weights (the per-piece path) and 1-32 rows (f32 x and
// its bf16 copy from 5 rows).
TEST_F(Gpu, GemvStagesAndEarlyWeightsKeepTheBits) {
  for (auto [N, K] : {std::array<int64_t, 2>{4096, 4096}, {1000, 4104}, {257, 1001}}) {
    for (bool misaligned_w : {false, true}) {
      const int64_t M = 32, ldw = misaligned_w ? K + 3 : K;
      auto x = randn(size_t(M * K), 31 + uint32_t(K));
      const auto w = to_bf16(randn(size_t(N * ldw + 1), 32 + uint32_t(N), 0.05f));
      DeviceBuffer dx = DeviceBuffer::from(x), dw = DeviceBuffer::from(w);
      const uint16_t* wp = dw.as<const uint16_t>() + (misaligned_w ? 1 : 0);
      for (int64_t rows : {1, 3, 5, 16, 24, 32}) {
        auto run = [&](cuda::kernels::GemvForce force) {
          DeviceBuffer y = poisoned(size_t(rows * N));
          const cuda::kernels::MatmulArgs a{.x = dx.as<const float>(),
                                            .ldx = K,
                                            .w = wp,
                                            .w_bf16 = true,
                                            .ldw = ldw,
                                            .y = y.as<float>(),
                                            .ldy = N,
                                            .M = rows,
                                            .N = N,
                                            .K = K};
          cuda::kernels::matmul_bf16_gemv(a, cuda::cuda_stream(), force);
          return download(y, size_t(rows * N));
        };
        const auto base = run({.stages = 2, .early_w = 0});
        for (float v : base) ASSERT_TRUE(std::isfinite(v));
        const std::string where = "N " + std::to_string(N) + ", K " + std::to_string(K) + ", rows " +
                                  std::to_string(rows) + (misaligned_w ? ", misaligned w" : "");
        for (int stages : {0, 2, 3, 4, 5})
          for (int early : {0, 1}) {
            const auto got = run({.stages = stages, .early_w = early});
            EXPECT_TRUE(bit_equal(got.data(), base.data(), base.size()))
                << "stages " << stages << ", early weights " << early << ", " << where;
          }
      }
    }
  }
}

// What the gemv kernel reads before waiting for the previous kernel is only weights: x written by the
// kernel just before it (an add, in place) is read after that kernel has finished, and weights written
// by the copy kernel just before it (copy_many, which lets no successor start early) are read after
// the copy. Each is checked against the same matmul over operands that were ready long before.
TEST_F(Gpu, GemvEarlyWeightsWaitForTheKernelBefore) {
  const int64_t N = 4096, K = 4096;
  auto x = randn(size_t(K), 41), delta = randn(size_t(K), 42);
  const auto w = to_bf16(randn(size_t(N * K), 43, 0.05f));
  std::vector<uint16_t> zeros(w.size(), 0);
  DeviceBuffer dx = DeviceBuffer::from(x), dd = DeviceBuffer::from(delta), dw = DeviceBuffer::from(w);
  const TensorView X = dev_view(dx, DType::F32, {1, K}), D = dev_view(dd, DType::F32, {1, K});
  const TensorView W = dev_view(dw, DType::BF16, {N, K});
  for (int rep = 0; rep < 3; ++rep) {
    // x' = x + delta computed just before the matmul, against x' made ready first.
    DeviceBuffer dx2 = DeviceBuffer::from(x), want_y = poisoned(size_t(N)), got_y = poisoned(size_t(N));
    const TensorView X2 = dev_view(dx2, DType::F32, {1, K});
    cuda_ops().add(X2, D);
    cuda::synchronize();
    cuda_ops().matmul(X2, W, dev_view(want_y, DType::F32, {1, N}));
    DeviceBuffer dx3 = DeviceBuffer::from(x);
    const TensorView X3 = dev_view(dx3, DType::F32, {1, K});
    cuda_ops().add(X3, D);
    cuda_ops().matmul(X3, W, dev_view(got_y, DType::F32, {1, N}));
    EXPECT_TRUE(bit_equal(download(got_y, size_t(N)).data(), download(want_y, size_t(N)).data(), size_t(N)))
        << "x written by the kernel before, rep " << rep;

    // Weights copied in by copy_many just before the matmul (zeros before the copy).
    DeviceBuffer dw2 = DeviceBuffer::from(zeros), copied_y = poisoned(size_t(N));
    // (Two regions: one would be a cudaMemcpyAsync, which no kernel overlaps anyway.)
    const size_t half = w.size();  // bytes in each half
    const std::vector<CopyRegion> regions{
        {dw2.data(), dw.data(), half},
        {static_cast<char*>(dw2.data()) + half, static_cast<const char*>(dw.data()) + half, half}};
    cuda_memory().copy_many(regions);
    cuda_ops().matmul(X, dev_view(dw2, DType::BF16, {N, K}), dev_view(copied_y, DType::F32, {1, N}));
    DeviceBuffer direct_y = poisoned(size_t(N));
    cuda_ops().matmul(X, W, dev_view(direct_y, DType::F32, {1, N}));
    EXPECT_TRUE(bit_equal(download(copied_y, size_t(N)).data(), download(direct_y, size_t(N)).data(), size_t(N)))
        << "weights copied by the kernel before, rep " << rep;
  }
}

}  // namespace
}  // namespace specserve::cuda_test
