// cuda_ops() against cpu_ops() for the Gated DeltaNet sequence ops (the conv, its per-span form, the
// gate preparation and the delta rule) and copy_many; and their bit-identities on the GPU (a span alone
// equals the span inside a call of several, a K-row stepped span equals K one-row calls).
#include <cstring>
#include <span>

#include "backend/cuda/cuda_memory.h"
#include "gdn_test_util.h"

namespace specserve::cuda_test {
namespace {

TEST_F(Gpu, CausalConvSiluAgreesWithCpu) {
  const GdnDims d{4, 8, 64, 64, 4};
  const int64_t C = d.conv_dim(), n = 37, Kc = d.conv_kernel;
  auto x = randn(size_t(n * C), 91), win = randn(size_t((Kc - 1) * C), 92), w = randn(size_t(C * Kc), 93, 0.5f);
  std::vector<float> want(x.size());
  cpu_ops().causal_conv_silu(host_view(x.data(), DType::F32, {n, C}), host_view(win.data(), DType::F32, {Kc - 1, C}),
                             host_view(w.data(), DType::F32, {C, Kc}), host_view(want.data(), DType::F32, {n, C}));
  DeviceBuffer dx = DeviceBuffer::from(x), dwin = DeviceBuffer::from(win), dw = DeviceBuffer::from(w),
               out = poisoned(x.size());
  cuda_ops().causal_conv_silu(dev_view(dx, DType::F32, {n, C}), dev_view(dwin, DType::F32, {Kc - 1, C}),
                              dev_view(dw, DType::F32, {C, Kc}), dev_view(out, DType::F32, {n, C}));
  EXPECT_LT(rel_err(download(out, x.size()), want), 1e-6);
}

// Several sequences' spans in one call: each span gives the bits of the one-span call (the conv_one kernel),
// and the CPU's per-span default agrees.
TEST_F(Gpu, CausalConvSiluSpansEqualOneSpanCalls) {
  const GdnDims d{2, 4, 32, 32, 4};
  const int64_t C = d.conv_dim(), Kc = d.conv_kernel;
  const int64_t lens[] = {1, 16, 5, 0, 3, 75};  // 75: runs of 32 rows (the Kc = 4 kernel) and a partial one
  int64_t R = 0;
  for (int64_t l : lens) R += l;
  auto x = randn(size_t(R * C), 94), w = randn(size_t(C * Kc), 95, 0.5f);
  DeviceBuffer dx = DeviceBuffer::from(x), dw = DeviceBuffer::from(w), out = poisoned(size_t(R * C)),
               one = poisoned(size_t(R * C));
  std::vector<std::vector<float>> wins;
  std::vector<DeviceBuffer> dwins;
  std::vector<ConvSpan> dev_spans, host_spans;
  int64_t row = 0;
  for (size_t i = 0; i < std::size(lens); ++i) {
    wins.push_back(randn(size_t((Kc - 1) * C), 96 + uint32_t(i)));
    dwins.push_back(DeviceBuffer::from(wins.back()));
    dev_spans.push_back({dev_view(dwins.back(), DType::F32, {Kc - 1, C}), row, lens[i]});
    host_spans.push_back({host_view(wins.back().data(), DType::F32, {Kc - 1, C}), row, lens[i]});
    row += lens[i];
  }
  const TensorView X = dev_view(dx, DType::F32, {R, C}), W = dev_view(dw, DType::F32, {C, Kc});
  cuda_ops().causal_conv_silu_spans(X, dev_spans, W, dev_view(out, DType::F32, {R, C}));
  for (const auto& s : dev_spans)
    cuda_ops().causal_conv_silu(X.rows(s.row_begin, s.row_begin + s.rows), s.window, W,
                                dev_view(one, DType::F32, {R, C}).rows(s.row_begin, s.row_begin + s.rows));
  const auto got = download(out, size_t(R * C)), each = download(one, size_t(R * C));
  EXPECT_TRUE(bit_equal(got.data(), each.data(), got.size()));
  std::vector<float> want(size_t(R * C));
  cpu_ops().causal_conv_silu_spans(host_view(x.data(), DType::F32, {R, C}), host_spans,
                                   host_view(w.data(), DType::F32, {C, Kc}),
                                   host_view(want.data(), DType::F32, {R, C}));
  EXPECT_LT(rel_err(got, want), 1e-6);
  // A span past the rows is a clear error, not a launch.
  std::vector<ConvSpan> bad{{dev_spans[0].window, R - 1, 2}};
  EXPECT_THROW(cuda_ops().causal_conv_silu_spans(X, bad, W, dev_view(out, DType::F32, {R, C})), Error);
}

// Memory::copy_many: word-aligned and odd-sized regions in one launch land like separate copies.
TEST_F(Gpu, CopyManyCopiesEveryRegion) {
  const Memory& mem = cuda_memory();
  std::vector<unsigned char> src(100000);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 7 + 3);
  DeviceBuffer dsrc = DeviceBuffer::from(src), ddst = DeviceBuffer::from(std::vector<unsigned char>(src.size(), 0));
  auto* s = static_cast<const unsigned char*>(dsrc.data());
  auto* d = static_cast<unsigned char*>(ddst.data());
  const std::vector<CopyRegion> regions{
      {d, s + 4000, 4096}, {d + 5000, s, 13}, {d + 6001, s + 77, 60001}, {d + 9, s, 0}};
  mem.copy_many(regions);
  std::vector<unsigned char> want(src.size(), 0);
  for (const auto& r : regions)
    std::memcpy(want.data() + (static_cast<unsigned char*>(r.dst) - d),
                src.data() + (static_cast<const unsigned char*>(r.src) - s), r.bytes);
  EXPECT_EQ(ddst.to_vector<unsigned char>(src.size()), want);
}

TEST_F(Gpu, GdnPrepareAgreesWithCpu) {
  const GdnDims d{4, 8, 64, 64, 4};
  const int64_t R = 37, Hv = d.num_v_heads;
  auto qkv = randn(size_t(R * d.conv_dim()), 101), a = randn(size_t(R * Hv), 102), b = randn(size_t(R * Hv), 103);
  auto alog = randn(size_t(Hv), 104, 0.5f), dt = randn(size_t(Hv), 105, 0.5f);
  DeviceBuffer dqkv = DeviceBuffer::from(qkv), da = DeviceBuffer::from(a), db = DeviceBuffer::from(b),
               dal = DeviceBuffer::from(alog), ddt = DeviceBuffer::from(dt);
  cpu_ops().gdn_prepare(host_view(qkv.data(), DType::F32, {R, d.conv_dim()}), host_view(a.data(), DType::F32, {R, Hv}),
                        host_view(b.data(), DType::F32, {R, Hv}), host_view(alog.data(), DType::F32, {Hv}),
                        host_view(dt.data(), DType::F32, {Hv}), d);
  cuda_ops().gdn_prepare(dev_view(dqkv, DType::F32, {R, d.conv_dim()}), dev_view(da, DType::F32, {R, Hv}),
                         dev_view(db, DType::F32, {R, Hv}), dev_view(dal, DType::F32, {Hv}),
                         dev_view(ddt, DType::F32, {Hv}), d);
  EXPECT_LT(rel_err(download(dqkv, qkv.size()), qkv), 1e-6);
  EXPECT_LT(rel_err(download(da, a.size()), a), 1e-6);
  EXPECT_LT(rel_err(download(db, b.size()), b), 1e-6);
}

// Prepared inputs for the rule (prepared on the CPU, copied to the device unchanged); the CPU output
// starts at 0 outside the spans.
struct Gdn : GdnInputs {
  Gdn(GdnDims dims, int64_t t) : GdnInputs(dims, t, 111) {}
  void cpu(std::span<const GdnSpan> spans, std::vector<float>& out) { GdnInputs::cpu(spans, out, 0.0f); }
};

class GatedDeltaRule : public Gpu, public ::testing::WithParamInterface<GdnDims> {};

TEST_P(GatedDeltaRule, SpansAgreeWithCpu) {
  Gdn c(GetParam(), 150);
  const size_t SF = size_t(c.d.state_floats()), OF = size_t(c.T * c.d.value_dim());
  // Two sequences in one call: A stepped over rows [0, 40) from a non-zero state, B chunked over rows
  // [40, 150) starting at absolute position 37 (so its chunks are cut at 64 - 37 and then every 64).
  auto sA = randn(SF, 116, 0.3f), sB = randn(SF, 117, 0.3f);
  auto hA = sA, hB = sB;
  GdnSpan host_spans[2] = {{hA.data(), 0, 40, 300, false}, {hB.data(), 40, 110, 37, true}};
  std::vector<float> want;
  c.cpu(host_spans, want);
  DeviceBuffer dA = DeviceBuffer::from(sA), dB = DeviceBuffer::from(sB), out = poisoned(OF);
  GdnSpan dev_spans[2] = {{dA.as<float>(), 0, 40, 300, false}, {dB.as<float>(), 40, 110, 37, true}};
  c.gpu(dev_spans, out);
  auto got = download(out, OF);
  const size_t split = size_t(40 * c.d.value_dim());
  EXPECT_LT(rel_err(std::vector<float>(got.begin(), got.begin() + split),
                    std::vector<float>(want.begin(), want.begin() + split)),
            2e-5)
      << "stepped";
  EXPECT_LT(
      rel_err(std::vector<float>(got.begin() + split, got.end()), std::vector<float>(want.begin() + split, want.end())),
      5e-5)
      << "chunked (run as the recurrence on CUDA)";
  EXPECT_LT(rel_err(download(dA, SF), hA), 2e-5);
  EXPECT_LT(rel_err(download(dB, SF), hB), 5e-5);
}

TEST_P(GatedDeltaRule, StateInLeavesSourceUntouchedAndMatchesInPlace) {
  Gdn c(GetParam(), 12);
  const size_t SF = size_t(c.d.state_floats()), OF = size_t(c.T * c.d.value_dim());
  auto s0 = randn(SF, 118, 0.3f);
  // CPU reference with state_in.
  std::vector<float> hsrc = s0, hdst(SF, -7.0f), want;
  GdnSpan hs{hdst.data(), 0, c.T, 0, false, hsrc.data()};
  c.cpu(std::span(&hs, 1), want);
  // GPU with state_in, and GPU in place.
  DeviceBuffer src = DeviceBuffer::from(s0), dst = poisoned(SF), inplace = DeviceBuffer::from(s0);
  DeviceBuffer o1 = poisoned(OF), o2 = poisoned(OF);
  GdnSpan a{dst.as<float>(), 0, c.T, 0, false, src.as<const float>()};
  GdnSpan b{inplace.as<float>(), 0, c.T, 0, false};
  c.gpu(std::span(&a, 1), o1);
  c.gpu(std::span(&b, 1), o2);
  EXPECT_TRUE(bit_equal(download(src, SF).data(), s0.data(), SF));
  EXPECT_TRUE(bit_equal(download(dst, SF).data(), download(inplace, SF).data(), SF));
  EXPECT_TRUE(bit_equal(download(o1, OF).data(), download(o2, OF).data(), OF));
  EXPECT_LT(rel_err(download(o1, OF), want), 2e-5);
  EXPECT_LT(rel_err(download(dst, SF), hdst), 2e-5);
}

TEST_P(GatedDeltaRule, SteppedSpanEqualsOneRowCalls) {
  const int64_t K = 16;
  Gdn c(GetParam(), K);
  const size_t SF = size_t(c.d.state_floats()), OF = size_t(c.T * c.d.value_dim());
  auto s0 = randn(SF, 119, 0.3f);
  DeviceBuffer whole = DeviceBuffer::from(s0), steps = DeviceBuffer::from(s0), o1 = poisoned(OF), o2 = poisoned(OF);
  GdnSpan all{whole.as<float>(), 0, K, 100, false};
  c.gpu(std::span(&all, 1), o1);
  for (int64_t r = 0; r < K; ++r) {
    GdnSpan one{steps.as<float>(), r, 1, 100 + r, false};
    c.gpu(std::span(&one, 1), o2);
  }
  EXPECT_TRUE(bit_equal(download(o1, OF).data(), download(o2, OF).data(), OF));
  EXPECT_TRUE(bit_equal(download(whole, SF).data(), download(steps, SF).data(), SF));
  // A verify-style extend: the first row reads the committed state through state_in.
  DeviceBuffer committed = DeviceBuffer::from(s0), scratch = poisoned(SF), o3 = poisoned(OF);
  GdnSpan ext{scratch.as<float>(), 0, K, 100, false, committed.as<const float>()};
  c.gpu(std::span(&ext, 1), o3);
  EXPECT_TRUE(bit_equal(download(o3, OF).data(), download(o1, OF).data(), OF));
  EXPECT_TRUE(bit_equal(download(scratch, SF).data(), download(whole, SF).data(), SF));
}

INSTANTIATE_TEST_SUITE_P(Dims, GatedDeltaRule,
                         ::testing::Values(GdnDims{4, 8, 64, 64, 4}, GdnDims{2, 4, 128, 128, 4},
                                           GdnDims{2, 2, 16, 12, 4}, GdnDims{2, 4, 32, 48, 4},
                                           GdnDims{1, 3, 48, 80, 4}),
                         [](const ::testing::TestParamInfo<GdnDims>& i) {
                           const auto& d = i.param;
                           return "hk" + std::to_string(d.num_k_heads) + "_hv" + std::to_string(d.num_v_heads) + "_dk" +
                                  std::to_string(d.k_dim) + "_dv" + std::to_string(d.v_dim);
                         });

}  // namespace
}  // namespace specserve::cuda_test
