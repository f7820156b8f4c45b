// The W8A8 prefill GEMM (backend/cuda/matmul_prefill_fp8_sm90a.cu; MatmulKernel::Fp8Prefill, prefill matmuls with
// fp8 weights on sm_90a): the activation pass has the host rule's codes and scales bit for bit (ties, zeros, tiny
// and huge groups, K tails); the GEMM agrees with the host reference (tests/backend/fp8_prefill_reference.h)
// within the bound derived there, on the 8B / 27B shapes and on tails (K = 4096 + 64, N = 1000, K below one
// block); rows are deterministic per sequence: a row alone, inside 300 and 2048 rows, and under two different
// chunkings of the rows has the same bits; several weights in one call (q/k/v, more than one launch's four) equal
// separate calls; the SwiGLU form (gate and up in one pass) has the bits of the two GEMMs then swiglu, and its
// quantised h is the activation pass's bit for bit. The activation rule itself is checked on the host
// (tests/backend/test_fp8_prefill_rule.cpp).
#include <algorithm>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "../backend/fp8_prefill_reference.h"
#include "../backend/fp8_test_weights.h"
#include "backend/cuda/fp8_arrange.h"
#include "backend/cuda/cuda_memory.h"
#include "backend/cuda/fp8_code_order.h"
#include "backend/cuda/kernels.h"
#include "cuda_test_util.h"

namespace specserve::cuda_test {
namespace {

using specserve::testing::Fp8Scales;
using specserve::testing::Fp8TestWeight;
using specserve::testing::make_fp8_weight;
namespace k = cuda::kernels;
namespace fp8a = cuda::fp8a;

bool w8a8_runs() { return k::matmul_device().wgmma && k::matmul_device().fp8_w8a8; }

// An fp8 weight on the device (codes [N, K] packed: ldw = K, which the GEMM takes when K % 16 == 0), arranged as
// Memory::arrange_fp8_codes leaves a loaded one.
struct DeviceFp8 {
  Fp8TestWeight host;
  DeviceBuffer codes, scales;
  TensorView view;
  DeviceFp8(int64_t N, int64_t K, uint32_t seed, Fp8Scales kind = Fp8Scales::F32)
      : host(make_fp8_weight(N, K, seed, kind)) {
    codes = DeviceBuffer::from(std::vector<uint8_t>(host.codes.as<uint8_t>(), host.codes.as<uint8_t>() + N * K));
    k::fp8_arrange_codes(codes.as<uint8_t>(), N, K, K, cuda::cuda_stream());  // the device's order
    scales =
        DeviceBuffer::from(std::vector<float>(host.scales.as<float>(), host.scales.as<float>() + host.scales.numel()));
    view = TensorView::contiguous(codes.data(), DType::F8_E4M3, {N, K}, Device::CUDA);
    view.scales = scales.as<const float>();
  }
  int64_t scale_ld() const { return host.scales.shape()[1]; }
};

std::vector<float> prefill(const TensorView& x, const TensorView& w) {
  const int64_t M = x.dim(0), N = w.dim(0);
  DeviceBuffer y = poisoned(size_t(M * N));
  cuda_ops().matmul_prefill(x, w, dev_view(y, DType::F32, {M, N}));
  return download(y, size_t(M * N));
}

// Activations with the quantiser's edge cases: normal values, a zero group, a subnormal group, a group of one
// value, exact ties after scaling (amax 448: scale 1, values on e4m3 midpoints), a huge group.
std::vector<float> edgy_x(int64_t M, int64_t K, uint32_t seed) {
  auto x = randn(size_t(M * K), seed);
  for (int64_t m = 0; m < M; ++m) {
    float* r = x.data() + m * K;
    const int64_t g = (m % 5) * 128;
    if (g + 128 > K) continue;
    switch (m % 4) {
      case 0:
        for (int64_t k = g; k < g + 128; ++k) r[k] = 0.0f;
        break;
      case 1:
        for (int64_t k = g; k < g + 128; ++k) r[k] *= 1e-39f;
        break;
      case 2:
        r[g] = 448.0f;
        for (int64_t k = g + 1; k < g + 128; ++k) r[k] = 1.0625f * float(1 + k % 3) * (k % 2 ? 1.0f : -1.0f);
        break;
      default:
        for (int64_t k = g; k < g + 128; ++k) r[k] *= 1e20f;
    }
  }
  return x;
}

// The device pass: codes and scales bit for bit the host rule's, for K tails and odd strides; the codes in the
// weights' fragment order (fp8_code_order.h).
TEST_F(Gpu, Fp8PrefillActivationPassHasTheHostRulesBits) {
  for (int64_t K : {int64_t{4096 + 64}, int64_t{1000}, int64_t{37}, int64_t{128}, int64_t{5120}})
    for (int64_t ldx : {K, K + 3}) {
      const int64_t M = 77;
      auto x = edgy_x(M, ldx, uint32_t(K + ldx));
      // Groups whose quotients sit within a few ulp of e4m3 rounding midpoints (normal and subnormal codes) under
      // scales 3 and 5 (amax 448 × 3 and × 5), whose reciprocals are inexact: the rule divides.
      for (const int64_t m : {int64_t{3}, int64_t{7}}) {
        if (K < 128) break;
        const float mult = m == 3 ? 3.0f : 5.0f;
        float* r = x.data() + m * ldx;
        r[0] = 448.0f * mult;
        const float mids[] = {1.0625f, 1.1875f, 2.125f, 3.25f, 0.5625f, 13.0f, 0.0166015625f, 0.0029296875f};
        for (int64_t k = 1; k < 128; ++k) {
          const float q = mids[k % 8] * (1.0f + float(k % 9 - 4) * 0x1p-23f);
          r[k] = (k % 2 ? -1.0f : 1.0f) * q * mult;
        }
      }
      DeviceBuffer dx = DeviceBuffer::from(x);
      const int64_t pitch = fp8a::code_pitch(K), sp = fp8a::scale_pitch(M), groups = fp8a::groups_of(K);
      DeviceBuffer codes(size_t(M * pitch)), scales(size_t(groups * sp) * 4);
      k::fp8_quantize_activations_into(dx.as<const float>(), ldx, M, K, codes.as<uint8_t>(), pitch, scales.as<float>(),
                                       sp, cuda::cuda_stream());
      const auto got_c = codes.to_vector<uint8_t>(size_t(M * pitch));
      const auto got_s = scales.to_vector<float>(size_t(groups * sp));
      const auto want = specserve::testing::quantise_rows(x.data(), ldx, M, K);
      for (int64_t m = 0; m < M; ++m) {
        for (int64_t kk = 0; kk < K; ++kk)
          ASSERT_EQ(int(got_c[size_t(m * pitch + cuda::fp8o::stored_index(kk, K))]),
                    int(want.codes[size_t(m * K + kk)]))
              << "row " << m << " k " << kk << " (K " << K << ", ldx " << ldx << ", x " << x[size_t(m * ldx + kk)]
              << ")";
        for (int64_t g = 0; g < groups; ++g) {
          const float a = got_s[size_t(g * sp + m)], b = want.scales[size_t(m * groups + g)];
          ASSERT_EQ(std::memcmp(&a, &b, 4), 0) << "row " << m << " group " << g << ": " << a << " vs " << b;
        }
      }
    }
}

// The GEMM against the host reference, element by element within fp8_prefill_tolerance.
void check_against_reference(int64_t M, int64_t N, int64_t K, Fp8Scales kind, uint32_t seed) {
  DeviceFp8 w(N, K, seed, kind);
  const auto x = edgy_x(M, K, seed + 1);
  DeviceBuffer dx = DeviceBuffer::from(x);
  const auto y = prefill(dev_view(dx, DType::F32, {M, K}), w.view);
  const auto q = specserve::testing::quantise_rows(x.data(), K, M, K);
  const std::string where = "M " + std::to_string(M) + " N " + std::to_string(N) + " K " + std::to_string(K);
  // The reference elements checked (every 7th column of the larger outputs), computed on every core: one thread
  // took ~90 s for these shapes (2.9 G double multiply-adds).
  const int64_t step = M * N > 200000 ? 7 : 1, per_row = (N + step - 1) / step;
  std::vector<specserve::testing::RefElement> ref(size_t(M * per_row));
  const int threads = int(std::clamp(std::thread::hardware_concurrency(), 1u, 32u));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (int64_t m = t; m < M; m += threads)
        for (int64_t j = 0; j < per_row; ++j)
          ref[size_t(m * per_row + j)] = specserve::testing::fp8_prefill_reference(
              q, m, w.host.codes.as<uint8_t>(), K, w.host.scales.as<float>(), w.scale_ld(), j * step);
    });
  for (auto& th : pool) th.join();
  int64_t checked = 0;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; n += step) {
      const auto& r = ref[size_t(m * per_row + n / step)];
      const float got = y[size_t(m * N + n)];
      ASSERT_TRUE(std::isfinite(got) || !std::isfinite(r.y)) << where << " row " << m << " col " << n;
      ASSERT_LE(std::fabs(double(got) - r.y), specserve::testing::fp8_prefill_tolerance(r))
          << where << " row " << m << " col " << n << ": " << got << " vs " << r.y << " (terms " << r.bound << ")";
      ++checked;
    }
  EXPECT_GT(checked, 0);
}

TEST_F(Gpu, Fp8PrefillAgreesWithTheHostReference) {
  if (!w8a8_runs()) GTEST_SKIP() << "no wgmma: prefill with fp8 weights takes the dequantisation";
  EXPECT_EQ(choose_matmul(MatmulBackend::Cuda, MatmulOrder::Prefill, 300, 4096,
                          MatmulWeight{1000, false, 4096, true, 1000, true}, k::matmul_device()),
            MatmulKernel::Fp8Prefill);
  struct Case {
    int64_t M, N, K;
    Fp8Scales kind;
  };
  const Case cases[] = {
      {300, 1000, 4096 + 64, Fp8Scales::F32},  // N and K off the 128 grid, M off the 128-row tile
      {1, 1000, 4096 + 64, Fp8Scales::Bf16},  {130, 130, 48, Fp8Scales::F32},     // K below one block
      {129, 257, 144, Fp8Scales::Mixed},      {64, 4096, 4096, Fp8Scales::Bf16},  // 8B q / o_proj
      {33, 12288, 4096, Fp8Scales::Bf16},                                         // 8B gate / up
      {40, 4096, 12288, Fp8Scales::Bf16},                                         // 8B down_proj
      {4, 5120, 17408, Fp8Scales::Bf16},                                          // 27B down_proj
      {17, 200, 256, Fp8Scales::Tiny},                                            // subnormal products of scales
  };
  for (const Case& c : cases) check_against_reference(c.M, c.N, c.K, c.kind, uint32_t(c.N + c.K + c.M));
}

// Deterministic per sequence: a row's bits depend on its x row, w and K only — not on M, the rows beside it or the
// chunking of the prompt.
TEST_F(Gpu, Fp8PrefillRowsDoNotDependOnTheirBatchOrChunking) {
  if (!w8a8_runs()) GTEST_SKIP() << "no wgmma: prefill with fp8 weights takes the dequantisation";
  for (const auto& [N, K] : {std::pair<int64_t, int64_t>{1000, 4096 + 64}, std::pair<int64_t, int64_t>{4096, 4096}}) {
    DeviceFp8 w(N, K, uint32_t(N + K), Fp8Scales::Bf16);
    const int64_t kRows = 2048;
    const auto x = edgy_x(kRows, K, 99);
    DeviceBuffer dx = DeviceBuffer::from(x);
    const TensorView X = dev_view(dx, DType::F32, {kRows, K});
    const std::string where = " (N " + std::to_string(N) + ", K " + std::to_string(K) + ")";
    const auto all = prefill(X, w.view);
    for (float v : all) ASSERT_TRUE(std::isfinite(v)) << where;
    for (int64_t r : {0, 1, 63, 64, 127, 128, 299, 1000, 2047}) {
      const auto one = prefill(X.rows(r, r + 1), w.view);
      ASSERT_TRUE(bit_equal(one.data(), all.data() + r * N, size_t(N))) << "row " << r << " alone" << where;
    }
    for (int64_t first : {0, 1, 517, 1748}) {
      const auto part = prefill(X.rows(first, first + 300), w.view);
      for (int64_t m = 0; m < 300; ++m)
        ASSERT_TRUE(bit_equal(part.data() + m * N, all.data() + (first + m) * N, size_t(N)))
            << "row " << first + m << " at " << m << " of 300" << where;
    }
    // Two chunkings of the 2048 rows: every chunk's rows have the bits of the whole.
    for (const std::vector<int64_t>& cuts :
         {std::vector<int64_t>{0, 700, 2048}, std::vector<int64_t>{0, 128, 1001, 1002, 2048}}) {
      for (size_t c = 0; c + 1 < cuts.size(); ++c) {
        const auto part = prefill(X.rows(cuts[c], cuts[c + 1]), w.view);
        ASSERT_TRUE(bit_equal(part.data(), all.data() + cuts[c] * N, size_t((cuts[c + 1] - cuts[c]) * N)))
            << "chunk [" << cuts[c] << ", " << cuts[c + 1] << ")" << where;
      }
    }
  }
}

// Several weights sharing x (one quantised copy, up to four a launch): each output has its lone call's bits; with
// a bf16 weight among them (its own prefill GEMM) and with five weights (two launches).
TEST_F(Gpu, Fp8PrefillSeveralWeightsEqualSeparateCalls) {
  if (!w8a8_runs()) GTEST_SKIP() << "no wgmma: prefill with fp8 weights takes the dequantisation";
  const int64_t K = 4096, M = 300;
  std::vector<DeviceFp8> ws;
  const int64_t Ns[5] = {4096, 1024, 1024, 1000, 130};
  for (int i = 0; i < 5; ++i) ws.emplace_back(Ns[i], K, uint32_t(70 + i), Fp8Scales::Bf16);
  const Fp8TestWeight bh = make_fp8_weight(1024, K, 80);
  DeviceBuffer b = DeviceBuffer::from(std::vector<uint16_t>(bh.bf16.as<uint16_t>(), bh.bf16.as<uint16_t>() + 1024 * K));
  const auto x = randn(size_t(M * K), 81);
  DeviceBuffer dx = DeviceBuffer::from(x);
  const TensorView X = dev_view(dx, DType::F32, {M, K});
  for (bool with_bf16 : {false, true}) {
    std::vector<TensorView> wv, yv;
    std::vector<DeviceBuffer> ys;
    std::vector<int64_t> n_of;
    for (int i = 0; i < 5; ++i) {
      if (with_bf16 && i == 2) {
        wv.push_back(dev_view(b, DType::BF16, {1024, K}));
      } else {
        wv.push_back(ws[size_t(i)].view);
      }
      n_of.push_back(wv.back().dim(0));
      ys.push_back(poisoned(size_t(M * n_of.back())));
    }
    for (int i = 0; i < 5; ++i) yv.push_back(dev_view(ys[size_t(i)], DType::F32, {M, n_of[size_t(i)]}));
    cuda_ops().matmul_multi_prefill(X, wv, yv);
    for (int i = 0; i < 5; ++i)
      EXPECT_TRUE(bit_equal(download(ys[size_t(i)], size_t(M * n_of[size_t(i)])).data(),
                            prefill(X, wv[size_t(i)]).data(), size_t(M * n_of[size_t(i)])))
          << "weight " << i << (with_bf16 ? " (weight 2 bf16)" : "");
  }
}

// Where the GEMM does not take the weight (ldw not a multiple of 16 bytes), prefill still runs, through the
// dequantisation, with its bits.
TEST_F(Gpu, Fp8PrefillFallsBackToTheDequantisationForOddStrides) {
  const int64_t N = 300, K = 1000, M = 40;
  DeviceFp8 w(N, K, 5);
  const auto x = randn(size_t(M * K), 6);
  DeviceBuffer dx = DeviceBuffer::from(x);
  const TensorView X = dev_view(dx, DType::F32, {M, K});
  EXPECT_EQ(choose_matmul(MatmulBackend::Cuda, MatmulOrder::Prefill, M, K, MatmulWeight{N, false, K, true, N, true},
                          k::matmul_device()),
            MatmulKernel::Fp8Dequant);
  DeviceBuffer bf =
      DeviceBuffer::from(std::vector<uint16_t>(w.host.bf16.as<uint16_t>(), w.host.bf16.as<uint16_t>() + N * K));
  const auto got = prefill(X, w.view), want = prefill(X, dev_view(bf, DType::BF16, {N, K}));
  EXPECT_TRUE(bit_equal(got.data(), want.data(), got.size()));
}

// The SwiGLU form (kernels::matmul_fp8_prefill_swiglu, Ops::matmul_prefill_swiglu with fp8 weights): h has the bits of
// the W8A8 GEMM of gate and up then swiglu, every element written (out poisoned); its quantised copy is what the
// activation pass writes of h, code for code (at the stored offsets) and scale for scale, after a call of another x
// left the scratch full of other codes; the down projection right after reads that copy (the pass does not run)
// and has the bits of the down projection of a plain copy of h. Shapes: N a multiple of 128, N whose last group
// is one sub-tile (160), N cut inside a 16-column group (1000), M off the 128-row tile, one row, the 8B MLP.
TEST_F(Gpu, Fp8PrefillSwigluFormEqualsMatmulsThenSwiglu) {
  if (!w8a8_runs()) GTEST_SKIP() << "no wgmma: prefill with fp8 weights takes the dequantisation";
  struct Case {
    int64_t M, I, K;
  };
  for (const Case& c : {Case{300, 1000, 4096 + 64}, Case{1, 160, 256}, Case{130, 160, 144}, Case{77, 256, 512},
                        Case{33, 12288, 4096}, Case{257, 384, 1024}}) {
    const auto [M, I, K] = c;
    SCOPED_TRACE("M " + std::to_string(M) + " I " + std::to_string(I) + " K " + std::to_string(K));
    DeviceFp8 g(I, K, uint32_t(I + K), Fp8Scales::Bf16), u(I, K, uint32_t(I + K + 1), Fp8Scales::Mixed);
    const auto x = edgy_x(M, K, uint32_t(M + 5));
    DeviceBuffer dx = DeviceBuffer::from(x);
    const TensorView X = dev_view(dx, DType::F32, {M, K});
    DeviceBuffer gy = poisoned(size_t(M * I)), uy = poisoned(size_t(M * I)), fused = poisoned(size_t(M * I));
    const TensorView ws[] = {g.view, u.view};
    const TensorView ys[] = {dev_view(gy, DType::F32, {M, I}), dev_view(uy, DType::F32, {M, I})};
    cuda_ops().matmul_multi_prefill(X, ws, ys);
    cuda_ops().swiglu(ys[0], ys[1], ys[0]);
    const auto want = download(gy, size_t(M * I));

    // The kernel's own call: h and its quantised copy, after a call of another x and more rows.
    auto args = [&](const DeviceFp8& w, const float* xp, int64_t rows, float* y) {
      k::MatmulArgs a;
      a.x = xp;
      a.ldx = K;
      a.w = w.view.data;
      a.ldw = K;
      a.y = y;
      a.ldy = I;
      a.M = rows;
      a.N = I;
      a.K = K;
      a.w_scales = w.scales.as<const float>();
      a.scale_ld = w.scale_ld();
      return a;
    };
    {
      const int64_t M2 = M + 40;
      DeviceBuffer other = DeviceBuffer::from(randn(size_t(M2 * K), 17, 3.0f)), out2 = poisoned(size_t(M2 * I));
      k::Fp8Activations junk;
      ASSERT_TRUE(k::matmul_fp8_prefill_swiglu(args(g, other.as<const float>(), M2, out2.as<float>()),
                                               args(u, other.as<const float>(), M2, out2.as<float>()), &junk,
                                               cuda::cuda_stream()));
    }
    k::Fp8Activations hq;
    ASSERT_TRUE(k::matmul_fp8_prefill_swiglu(args(g, dx.as<const float>(), M, fused.as<float>()),
                                             args(u, dx.as<const float>(), M, fused.as<float>()), &hq,
                                             cuda::cuda_stream()));
    const auto h = download(fused, size_t(M * I));
    ASSERT_TRUE(bit_equal(h.data(), want.data(), want.size()));
    const int64_t pitch = fp8a::code_pitch(I), sp = fp8a::scale_pitch(M), groups = fp8a::groups_of(I);
    ASSERT_EQ(hq.pitch, pitch);
    ASSERT_EQ(hq.scale_pitch, sp);
    ASSERT_EQ(hq.M, M);
    ASSERT_EQ(hq.K, I);
    std::vector<uint8_t> got_c(size_t(M * pitch)), want_c(size_t(M * pitch));
    std::vector<float> got_s(size_t(groups * sp)), want_s(size_t(groups * sp));
    cuda_memory().download(got_c.data(), hq.codes, got_c.size());
    cuda_memory().download(got_s.data(), hq.scales, got_s.size() * 4);
    DeviceBuffer pc(size_t(M * pitch)), ps(size_t(groups * sp) * 4);
    k::fp8_quantize_activations_into(fused.as<const float>(), I, M, I, pc.as<uint8_t>(), pitch, ps.as<float>(), sp,
                                     cuda::cuda_stream());
    cuda_memory().download(want_c.data(), pc.data(), want_c.size());
    cuda_memory().download(want_s.data(), ps.data(), want_s.size() * 4);
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t kk = 0; kk < I; ++kk) {
        const size_t at = size_t(m * pitch + cuda::fp8o::stored_index(kk, I));
        ASSERT_EQ(int(got_c[at]), int(want_c[at])) << "row " << m << " column " << kk;
      }
      for (int64_t gi = 0; gi < groups; ++gi) {
        const size_t at = size_t(gi * sp + m);
        ASSERT_EQ(std::memcmp(&got_s[at], &want_s[at], 4), 0) << "row " << m << " group " << gi;
      }
    }

    // Through Ops: the same h.
    const TensorView OUT = dev_view(fused, DType::F32, {M, I});
    const DeviceBuffer poison = poisoned(size_t(M * I));
    cuda_memory().copy(fused.data(), poison.data(), size_t(M * I) * 4);
    ASSERT_TRUE(cuda_ops().matmul_prefill_swiglu(X, g.view, u.view, OUT));
    ASSERT_TRUE(bit_equal(download(fused, size_t(M * I)).data(), want.data(), want.size()));
    if (I % 16 != 0) continue;  // the GEMM takes K = I only for 16-byte code rows (else the dequantisation)
    // The down projection right after the SwiGLU form reads its copy (x without edge cases, so that h and the
    // outputs stay finite); everything allocated first (an upload in between would void the copy's note).
    DeviceFp8 d(64, I, uint32_t(I + 9), Fp8Scales::Bf16);
    DeviceBuffer y_fused = poisoned(size_t(M * 64)), y_plain = poisoned(size_t(M * 64)), copy = poisoned(size_t(M * I));
    DeviceBuffer x2 = DeviceBuffer::from(randn(size_t(M * K), uint32_t(M + 6)));
    ASSERT_TRUE(cuda_ops().matmul_prefill_swiglu(dev_view(x2, DType::F32, {M, K}), g.view, u.view, OUT));
    const uint64_t before = k::fp8_activations_reused();
    cuda_ops().matmul_prefill(OUT, d.view, dev_view(y_fused, DType::F32, {M, 64}));
    const uint64_t after = k::fp8_activations_reused();
    cuda_memory().copy(copy.data(), fused.data(), size_t(M * I) * 4);
    cuda_ops().matmul_prefill(dev_view(copy, DType::F32, {M, I}), d.view, dev_view(y_plain, DType::F32, {M, 64}));
    EXPECT_EQ(after, before + 1) << "the down projection read the quantised copy";
    EXPECT_EQ(k::fp8_activations_reused(), after) << "a plain copy runs the activation pass";
    const auto plain = download(y_plain, size_t(M * 64));
    for (float v : plain) ASSERT_TRUE(std::isfinite(v));
    EXPECT_TRUE(bit_equal(download(y_fused, size_t(M * 64)).data(), plain.data(), plain.size()));
  }
}

}  // namespace
}  // namespace specserve::cuda_test
