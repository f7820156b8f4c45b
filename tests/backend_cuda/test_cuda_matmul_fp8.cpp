// Block-scaled fp8 weights on CUDA (backend/ops.h, Ops::matmul: the bits of the bf16 dequantisation;
// cuda/matmul_fp8_gemv.cu for 1-32 rows, cuda/matmul_fp8_dequant.cu beyond, and for prefill where the W8A8 GEMM
// is off — the tests that compare prefill bits turn it off; test_cuda_matmul_fp8_prefill.cpp tests it): the
// dequantisation pass against the definition's bits; every matmul bit for bit equal to the CUDA matmul of
// the bf16 dequantisation (row-invariant and prefill orders, odd shapes, misaligned codes, x's producer
// copy) and close to the CPU fp8 path; the fp8 gemv kernel the same on every path it can take (stage
// counts, early loads, the straight tiles or chunk by chunk, the bf16-scale multiply, the folded, bit and
// conversion paths; f32, bf16 and mixed scales; the 8B and 27B shapes, K off the 128 grid) and with several
// weights in one launch; rows bit-invariant (a row alone, inside 16, inside 32, inside more); matmul_multi
// with fp8 and bf16 weights equal to separate calls; the codes' arrangement (fp8_arrange_codes) is fp8_code_order.h's.
// Mirrors test_cuda_matmul_tensor_core.cpp; the kernel's index code and dequantisation identities are checked on the
// host too (test_cuda_matmul_fp8_host.cpp).
#include <array>
#include <memory>
#include <cstring>
#include <random>
#include <span>
#include <vector>

#include "../backend/fp8_test_weights.h"
#include "backend/cuda/fp8_arrange.h"
#include "backend/cuda/fp8_code_order.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/matmul_tensor_core.cuh"
#include "cuda_test_util.h"

namespace specserve::cuda_test {
namespace {

using specserve::testing::Fp8Scales;
using specserve::testing::Fp8TestWeight;
using specserve::testing::make_fp8_weight;
namespace k = cuda::kernels;

// The fp8 weight (codes and scales) and its bf16 dequantisation on the device, the codes arranged as
// Memory::arrange_fp8_codes leaves a loaded weight's (fp8_code_order.h). With `pad` > 0 the codes sit one byte
// past an aligned start with rows K + pad apart (the scalar load path).
struct DeviceFp8 {
  Fp8TestWeight host;
  DeviceBuffer codes, scales, bf16;
  TensorView fp8_view, bf16_view;
  DeviceFp8(int64_t N, int64_t K, uint32_t seed, int64_t pad = 0, Fp8Scales kind = Fp8Scales::F32)
      : host(make_fp8_weight(N, K, seed, kind)) {
    const int64_t ld = K + pad, off = pad ? 1 : 0;
    std::vector<uint8_t> c(size_t(N * ld + off), 0);
    for (int64_t n = 0; n < N; ++n) std::memcpy(c.data() + off + n * ld, host.codes.as<uint8_t>() + n * K, size_t(K));
    codes = DeviceBuffer::from(c);
    k::fp8_arrange_codes(codes.as<uint8_t>() + off, N, K, ld, cuda::cuda_stream());  // the device's order
    scales =
        DeviceBuffer::from(std::vector<float>(host.scales.as<float>(), host.scales.as<float>() + host.scales.numel()));
    bf16 = DeviceBuffer::from(std::vector<uint16_t>(host.bf16.as<uint16_t>(), host.bf16.as<uint16_t>() + N * K));
    fp8_view = TensorView::contiguous(codes.as<uint8_t>() + off, DType::F8_E4M3, {N, K}, Device::CUDA);
    fp8_view.strides[0] = ld;
    fp8_view.scales = scales.as<const float>();
    bf16_view = dev_view(bf16, DType::BF16, {N, K});
  }
};

// Prefill matmuls with fp8 weights through the bf16 dequantisation (Fp8Dequant), whose bits these tests compare,
// instead of the W8A8 GEMM that sm_90a takes by default (test_cuda_matmul_fp8_prefill.cpp tests that one).
struct DequantPrefill {
  bool was = k::set_matmul_fp8_w8a8(false);
  ~DequantPrefill() { k::set_matmul_fp8_w8a8(was); }
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

// fp8_arrange_codes puts every whole 16-column group of every row at fp8o::stored_index and leaves a group cut
// by K, the row padding and the bytes around the matrix as they were: odd K, padded and misaligned rows.
TEST_F(Gpu, Fp8ArrangeCodesIsTheFragmentOrder) {
  std::mt19937 rng(3);
  for (const auto& [N, K, ld, off] : std::vector<std::array<int64_t, 4>>{
           {3, 4096, 4096, 0}, {5, 100, 103, 1}, {2, 7, 9, 3}, {130, 128, 144, 0}, {1, 40, 40, 5}}) {
    std::vector<uint8_t> c(size_t(N * ld + off + 7));
    for (auto& b : c) b = static_cast<uint8_t>(rng());
    DeviceBuffer d = DeviceBuffer::from(c);
    k::fp8_arrange_codes(d.as<uint8_t>() + off, N, K, ld, cuda::cuda_stream());
    const auto got = d.to_vector<uint8_t>(c.size());
    std::vector<uint8_t> want = c;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t kk = 0; kk < K; ++kk)
        want[size_t(off + n * ld + cuda::fp8o::stored_index(kk, K))] = c[size_t(off + n * ld + kk)];
    ASSERT_EQ(got, want) << "N " << N << " K " << K << " ld " << ld << " off " << off;
  }
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
      DeviceFp8 w(d.N, d.K, uint32_t(d.N + d.K), 0, tiny ? Fp8Scales::Tiny : Fp8Scales::F32);
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
  const DequantPrefill dequant;
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
void check_fp8_row_invariance(int64_t N, int64_t K, Fp8Scales scales = Fp8Scales::F32) {
  const int64_t kRows = 96;
  DeviceFp8 w(N, K, uint32_t(N + 7 * K), 0, scales), w_odd(N, K, uint32_t(N + 7 * K), /*pad=*/3, scales);
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
TEST_F(Gpu, Fp8RowInvarianceBf16Scales) { check_fp8_row_invariance(4096, 4096, Fp8Scales::Bf16); }  // fast path
TEST_F(Gpu, Fp8RowInvarianceMixedScalesOddK) { check_fp8_row_invariance(1000, 4104, Fp8Scales::Mixed); }
TEST_F(Gpu, Fp8RowInvariance27BDown) { check_fp8_row_invariance(5120, 17408, Fp8Scales::Bf16); }  // S = 8, long

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

// matmul_multi (or its prefill form) over `ws` gives each weight's matmul alone bit for bit: run() of `refs` (an
// fp8 weight's bf16 dequantisation, or the bf16 weight itself).
void expect_multi_equals_separate(const TensorView& X, std::span<const TensorView> ws, std::span<const TensorView> refs,
                                  bool prefill) {
  const int64_t M = X.dim(0);
  std::vector<DeviceBuffer> outs;
  for (const TensorView& w : ws) outs.push_back(poisoned(size_t(M * w.dim(0))));
  std::vector<TensorView> ys;
  for (size_t i = 0; i < ws.size(); ++i) ys.push_back(dev_view(outs[i], DType::F32, {M, ws[i].dim(0)}));
  if (prefill)
    cuda_ops().matmul_multi_prefill(X, ws, ys);
  else
    cuda_ops().matmul_multi(X, ws, ys);
  for (size_t i = 0; i < ws.size(); ++i) {
    const auto n = size_t(M * ws[i].dim(0));
    EXPECT_TRUE(bit_equal(download(outs[i], n).data(), run(X, refs[i], prefill).data(), n))
        << "M " << M << (prefill ? " prefill" : "") << " part " << i;
  }
}

// matmul_multi over fp8 and bf16 weights (q/k/v, gate/up) equals one matmul per weight, in both orders.
TEST_F(Gpu, Fp8MatmulMultiEqualsSeparateMatmuls) {
  const DequantPrefill dequant;
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
      const TensorView ws[3] = {q.fp8_view, k.fp8_view, V}, refs[3] = {q.bf16_view, k.bf16_view, V};
      expect_multi_equals_separate(X, ws, refs, prefill);
    }
}

// fp8 weights of different K splits share one gemv launch (matmul_choice.h; Qwen3.5's in_proj_qkv, S = 4, beside
// in_proj_z, S = 8, at the 27B's K; a weight of S = 2; a last weight whose rows end inside a CTA): each output
// equals its weight's matmul alone, at every x form of the kernel (f32 x, x's 8- and 16-row copy).
TEST_F(Gpu, Fp8MatmulMultiOfDifferentSplitsEqualsSeparateMatmuls) {
  const int64_t K = 5120;
  const int64_t Ns[] = {10240, 6144, 24576, 1000};
  std::vector<int> splits;
  for (int64_t N : Ns) splits.push_back(cuda::tc::k_split(N, K, cuda::tc::split_target_ctas()).S);
  ASSERT_EQ(splits, (std::vector<int>{4, 8, 2, 8}));
  std::vector<std::unique_ptr<DeviceFp8>> w;
  for (size_t i = 0; i < std::size(Ns); ++i) w.push_back(std::make_unique<DeviceFp8>(Ns[i], K, 101 + i));
  const auto x = randn(size_t(32 * K), 105);
  DeviceBuffer dx = DeviceBuffer::from(x);
  for (int64_t M : {1, 2, 4, 5, 8, 16, 17, 32}) {
    const TensorView X = dev_view(dx, DType::F32, {M, K});
    std::vector<TensorView> ws, refs;
    for (const auto& d : w) ws.push_back(d->fp8_view), refs.push_back(d->bf16_view);
    expect_multi_equals_separate(X, ws, refs, false);
    expect_multi_equals_separate(X, std::span(ws).subspan(1, 2), std::span(refs).subspan(1, 2), false);
  }
}

// The bf16 weights of a call with fp8 ones share their own launch (matmul_choice.h: as Qwen3.5's in_proj_b / a
// beside the fp8 in_proj_qkv / z): each output equals its weight's matmul alone, at the rows of every kernel
// the pair can take (gemv, mid, the TMA kernel, prefill).
TEST_F(Gpu, Fp8MatmulMultiGroupsItsBf16WeightsWithTheSameBits) {
  const DequantPrefill dequant;
  const int64_t K = 2048, N = 48;
  DeviceFp8 qkv(1024, K, 91);
  std::vector<DeviceBuffer> small;
  for (uint64_t seed : {92, 93}) {
    const Fp8TestWeight h = make_fp8_weight(N, K, seed);
    small.push_back(DeviceBuffer::from(std::vector<uint16_t>(h.bf16.as<uint16_t>(), h.bf16.as<uint16_t>() + N * K)));
  }
  const TensorView B = dev_view(small[0], DType::BF16, {N, K}), A = dev_view(small[1], DType::BF16, {N, K});
  const auto x = randn(size_t(128 * K), 94);
  DeviceBuffer dx = DeviceBuffer::from(x);
  for (int64_t M : {1, 8, 16, 24, 32, 64, 128})
    for (bool prefill : {false, true}) {
      const TensorView X = dev_view(dx, DType::F32, {M, K});
      const TensorView ws[3] = {qkv.fp8_view, B, A}, refs[3] = {qkv.bf16_view, B, A};
      expect_multi_equals_separate(X, ws, refs, prefill);
    }
}

// From 5 rows the fp8 gemv kernel reads x through its bf16 copy; when x's producer (rms_norm) wrote that
// copy, the kernel reads it instead of converting x: the same bits, at the rows of each x mode (5-8: its
// first 8 rows, 9-16, two row blocks). The copy is used only when nothing was enqueued between the producer
// and the matmul (cuda_ops.cpp: take_xb), so the outputs are made (poisoned: a fill on the stream) before
// the norm — the first version of this test poisoned its output between the two, and never saw the copy
// used, at any M.
TEST_F(Gpu, Fp8GemvReadsTheProducersCopyWithTheSameBits) {
  const int64_t N = 1024, K = 4096, kMaxRows = 32;
  DeviceFp8 w(N, K, 81, 0, Fp8Scales::Bf16), w2(N, K, 84);
  const auto xh = randn(size_t(kMaxRows * K), 82);
  const auto gamma = randn(size_t(K), 83);
  DeviceBuffer dx = DeviceBuffer::from(xh), dg = DeviceBuffer::from(gamma), dn(size_t(kMaxRows * K) * 4);
  for (int64_t M : {5, 8, 9, 16, 17, 32}) {
    const TensorView X = dev_view(dx, DType::F32, {M, K}), Nx = dev_view(dn, DType::F32, {M, K});
    DeviceBuffer fused = poisoned(size_t(M * N)), plain = poisoned(size_t(M * N)), y1 = poisoned(size_t(M * N)),
                 y2 = poisoned(size_t(M * N));
    const uint64_t before = k::matmul_xb_reused();
    cuda_ops().rms_norm(X, dev_view(dg, DType::F32, {K}), NormKind::Plain, 1e-6f, Nx);
    cuda_ops().matmul(Nx, w.fp8_view, dev_view(fused, DType::F32, {M, N}));  // right after its producer
    EXPECT_EQ(k::matmul_xb_reused(), before + 1) << "M " << M << ": the fp8 gemv read the norm's copy";
    cuda_ops().matmul(Nx, w.fp8_view, dev_view(plain, DType::F32, {M, N}));  // converts x itself
    EXPECT_EQ(k::matmul_xb_reused(), before + 1) << "M " << M;
    const auto got = download(fused, size_t(M * N));
    ASSERT_TRUE(bit_equal(got.data(), download(plain, size_t(M * N)).data(), got.size())) << "M " << M;
    ASSERT_TRUE(bit_equal(got.data(), run(Nx, w.bf16_view).data(), got.size())) << "M " << M;
    // Two fp8 weights of the norm's output in one launch: the copy read once, each output its lone call's.
    cuda_ops().rms_norm(X, dev_view(dg, DType::F32, {K}), NormKind::Plain, 1e-6f, Nx);
    const uint64_t before2 = k::matmul_xb_reused();
    const TensorView ws[2] = {w.fp8_view, w2.fp8_view};
    const TensorView ys[2] = {dev_view(y1, DType::F32, {M, N}), dev_view(y2, DType::F32, {M, N})};
    cuda_ops().matmul_multi(Nx, ws, ys);
    EXPECT_EQ(k::matmul_xb_reused(), before2 + 1) << "M " << M << ": one launch read the copy";
    ASSERT_TRUE(bit_equal(download(y1, size_t(M * N)).data(), got.data(), got.size())) << "M " << M;
    ASSERT_TRUE(bit_equal(download(y2, size_t(M * N)).data(), run(Nx, w2.bf16_view).data(), got.size())) << "M " << M;
  }
}

// ---- the fp8 gemv kernel's paths ------------------------------------------------------------------------

k::MatmulArgs fp8_args(const TensorView& x, const TensorView& w, const DeviceBuffer& y) {
  k::MatmulArgs a;
  a.x = x.as<const float>();
  a.ldx = x.strides[0];
  a.w = w.data;
  a.ldw = w.strides[0];
  a.w_scales = w.scales;
  a.scale_ld = (w.dim(1) + 127) / 128;
  a.y = static_cast<float*>(y.data());
  a.ldy = w.dim(0);
  a.M = x.dim(0);
  a.N = w.dim(0);
  a.K = x.dim(1);
  return a;
}

std::string force_name(const k::Fp8GemvForce& f) {
  return "stages " + std::to_string(f.stages) + " early " + std::to_string(f.early_w) + " fast " +
         std::to_string(f.fast) + " convert " + std::to_string(f.convert) + " regular " + std::to_string(f.regular) +
         " warps " + std::to_string(f.warps);
}

// The forced variants run at each (shape, M): every stage count once over the rows, the early loads off,
// the bf16-scale multiply off (the folded path on the straight tiles, the bit path on the others), the
// conversion path, the straight tiles off (every tile chunk by chunk: the general fast and bit paths); with f32 x
// (1-4 rows) both CTA widths, 8 warps and 4, whatever the launch would pick.
std::vector<k::Fp8GemvForce> forces_for(size_t i) {
  const int stages[] = {3, 4, 6, 8};
  std::vector<k::Fp8GemvForce> v(6);
  v[1].stages = stages[i % 4];
  v[1].warps = 8;
  v[3].warps = 4;
  v[5].warps = i % 2 ? 8 : 4;
  v[2].stages = stages[(i + 2) % 4];
  v[2].early_w = 0;
  v[3].fast = 0;
  v[4].convert = 1;
  v[4].stages = stages[(i + 1) % 4];
  v[5].regular = 0;
  v[5].stages = stages[(i + 3) % 4];
  return v;
}

struct Fp8Case {
  int64_t N, K;
  Fp8Scales scales;
  const char* name;
};
// The 8B (hidden 4096, q 4096, k/v 1024, MLP 12288) and 27B (hidden 5120, MLP 17408) shapes with bf16 scales
// (Qwen's checkpoints: the fast path) and f32 ones (the general path); K off the 128 grid and odd N with mixed
// scales (per tile both paths; partial blocks, tiles cut by K).
const Fp8Case kFp8Cases[] = {
    {4096, 4096, Fp8Scales::Bf16, "8B q/o"},       {4096, 4096, Fp8Scales::F32, "8B q/o f32"},
    {1024, 4096, Fp8Scales::Bf16, "8B k/v"},       {12288, 4096, Fp8Scales::Bf16, "8B gate/up"},
    {4096, 12288, Fp8Scales::Bf16, "8B down"},     {4096, 12288, Fp8Scales::Mixed, "8B down mixed"},
    {5120, 5120, Fp8Scales::Bf16, "27B o"},        {17408, 5120, Fp8Scales::Bf16, "27B up"},
    {5120, 17408, Fp8Scales::F32, "27B down f32"}, {1000, 4104, Fp8Scales::Mixed, "K 4104"},
    {257, 1001, Fp8Scales::Mixed, "257x1001"},     {130, 3, Fp8Scales::Bf16, "K 3"},
    {3000, 496, Fp8Scales::Mixed, "S 1"},          {64, 12288, Fp8Scales::Tiny, "tiny scales"},
};

TEST_F(Gpu, Fp8GemvEveryPathHasTheBitsOfTheBf16Dequantisation) {
  size_t variant = 0;
  for (const Fp8Case& c : kFp8Cases) {
    DeviceFp8 w(c.N, c.K, uint32_t(5 * c.N + c.K), 0, c.scales);
    const auto x = randn(size_t(32 * c.K), uint32_t(c.K + 3));
    DeviceBuffer dx = DeviceBuffer::from(x);
    for (int64_t M : {1, 2, 3, 4, 5, 8, 9, 16, 17, 24, 32}) {
      const TensorView X = dev_view(dx, DType::F32, {M, c.K});
      const auto want = run(X, w.bf16_view);  // the bf16 gemv kernel on the dequantised weight
      for (const k::Fp8GemvForce& f : forces_for(variant++)) {
        DeviceBuffer y = poisoned(size_t(M * c.N));
        k::matmul_fp8_gemv(fp8_args(X, w.fp8_view, y), cuda::cuda_stream(), f);
        const auto got = download(y, size_t(M * c.N));
        ASSERT_TRUE(bit_equal(got.data(), want.data(), got.size())) << c.name << " M " << M << " " << force_name(f);
      }
      if (M == 1 || M == 16) {
        std::vector<float> cpu(size_t(M * c.N));
        cpu_ops().matmul(host_view(x.data(), DType::F32, {M, c.K}), w.host.view(),
                         host_view(cpu.data(), DType::F32, {M, c.N}));
        EXPECT_LT(rel_err(want, cpu), 1e-2) << "against the CPU, " << c.name << " M " << M;
      }
    }
  }
}

// q/k/v and gate/up in one launch (matmul_fp8_gemv_multi, and Ops::matmul_multi through the plan): each
// output has the bits of its lone call, whatever the other parts' scales, rows and forced paths.
TEST_F(Gpu, Fp8GemvSeveralWeightsInOneLaunch) {
  const int64_t K = 4096;
  DeviceFp8 q(4096, K, 91, 0, Fp8Scales::Bf16), kk(1024, K, 92, 0, Fp8Scales::F32),
      v(1024, K, 93, /*pad=*/16, Fp8Scales::Mixed), gate(12288, K, 94, 0, Fp8Scales::Bf16),
      up(12288, K, 95, 0, Fp8Scales::Bf16);
  const auto x = randn(size_t(32 * K), 96);
  DeviceBuffer dx = DeviceBuffer::from(x);
  size_t variant = 0;
  for (int64_t M : {1, 4, 5, 8, 16, 17, 32}) {
    const TensorView X = dev_view(dx, DType::F32, {M, K});
    for (const auto& group : {std::vector<DeviceFp8*>{&q, &kk, &v}, std::vector<DeviceFp8*>{&gate, &up}}) {
      std::vector<DeviceBuffer> ys;
      std::vector<k::MatmulArgs> args;
      for (DeviceFp8* w : group) ys.push_back(poisoned(size_t(M * w->fp8_view.dim(0))));
      for (size_t i = 0; i < group.size(); ++i) args.push_back(fp8_args(X, group[i]->fp8_view, ys[i]));
      ASSERT_TRUE(k::matmul_fp8_gemv_compatible(args.data(), int(args.size())));
      const auto forces = forces_for(variant);
      const k::Fp8GemvForce f = forces[variant % forces.size()];
      ++variant;
      k::matmul_fp8_gemv_multi(args.data(), int(args.size()), cuda::cuda_stream(), f);
      std::vector<TensorView> ws, yv;
      std::vector<DeviceBuffer> ys2;
      for (DeviceFp8* w : group) ys2.push_back(poisoned(size_t(M * w->fp8_view.dim(0))));
      for (size_t i = 0; i < group.size(); ++i) {
        ws.push_back(group[i]->fp8_view);
        yv.push_back(dev_view(ys2[i], DType::F32, {M, group[i]->fp8_view.dim(0)}));
      }
      cuda_ops().matmul_multi(X, ws, yv);
      for (size_t i = 0; i < group.size(); ++i) {
        const size_t n = size_t(M * group[i]->fp8_view.dim(0));
        const auto want = run(X, group[i]->bf16_view);
        ASSERT_TRUE(bit_equal(download(ys[i], n).data(), want.data(), n))
            << "M " << M << " part " << i << " " << force_name(f);
        ASSERT_TRUE(bit_equal(download(ys2[i], n).data(), want.data(), n)) << "matmul_multi, M " << M << " part " << i;
      }
    }
  }
  // Parts of another K split share a launch (Fp8MatmulMultiOfDifferentSplitsEqualsSeparateMatmuls); other x or
  // bf16 weights do not.
  DeviceBuffer y = poisoned(size_t(24576));
  const TensorView X = dev_view(dx, DType::F32, {1, K}), X2 = dev_view(dx, DType::F32, {2, K});
  k::MatmulArgs a[2] = {fp8_args(X, q.fp8_view, y), fp8_args(X, gate.fp8_view, y)};
  EXPECT_TRUE(k::matmul_fp8_gemv_compatible(a, 2));
  a[1] = fp8_args(X2, kk.fp8_view, y);
  EXPECT_FALSE(k::matmul_fp8_gemv_compatible(a, 2));
  a[1] = fp8_args(X, kk.fp8_view, y);
  EXPECT_TRUE(k::matmul_fp8_gemv_compatible(a, 2));
  a[1].w_scales = nullptr;
  EXPECT_FALSE(k::matmul_fp8_gemv_compatible(a, 2));
}

}  // namespace
}  // namespace specserve::cuda_test
