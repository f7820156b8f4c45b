// The prefill GEMM at each tile width (kernels::matmul_bf16_prefill's tile_n; backend/matmul_prefill_tile.h
// picks one per launch from N and K): every width against a double-precision reference of the bf16 operands;
// every width's bits equal 256's — each element is the same one f32 chain over K, one wgmma k16 step per 16 k,
// whatever wgmma's n (were its k16 step's internal sum to differ by n, this shows); a narrow width's rows
// depend on the row only (cut into calls, among other rows, beside other weights in the launch); and
// Ops::matmul_prefill, which takes the rule's width (160 for N = 5,120 on a 132-SM H200), gives 256's bits.
#include <cmath>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include "backend/cuda/kernels.h"
#include "backend/matmul_prefill_tile.h"
#include "cuda_test_util.h"

namespace specserve::cuda_test {
namespace {

namespace k = cuda::kernels;

// x [rows, K] f32 and w [N, K] bf16 on the device, with the host copies the reference reads.
struct Operands {
  int64_t rows, N, K;
  std::vector<float> xh;
  std::vector<uint16_t> wb;
  DeviceBuffer x, w;
};

// `wide`: x's rows scaled by 2^-20 .. 2^20 (row r by 2^(r * 7 % 41 - 20)), and w's rows by 2^-6 .. 2^6, so
// that the chains' partial sums span many exponents and any other order of a sum rounds differently.
Operands operands(int64_t rows, int64_t N, int64_t K, uint32_t seed, bool wide = false) {
  Operands o{rows, N, K, randn(size_t(rows * K), seed), {}, {}, {}};
  std::vector<float> wh = randn(size_t(N * K), seed + 1, 0.05f);
  if (wide) {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < K; ++c) o.xh[size_t(r * K + c)] *= std::ldexp(1.0f, int(r * 7 % 41) - 20);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < K; ++c) wh[size_t(n * K + c)] *= std::ldexp(1.0f, int(n * 5 % 13) - 6);
  }
  o.wb = to_bf16(wh);
  o.x = DeviceBuffer::from(o.xh);
  o.w = DeviceBuffer::from(o.wb);
  return o;
}

// The call on rows [row0, row0 + M) of x into y (rows ldy floats apart).
k::MatmulArgs args(const Operands& o, int64_t row0, int64_t M, float* y, int64_t ldy) {
  k::MatmulArgs a;
  a.x = o.x.as<const float>() + row0 * o.K;
  a.ldx = o.K;
  a.w = o.w.data();
  a.w_bf16 = true;
  a.ldw = o.K;
  a.y = y;
  a.ldy = ldy;
  a.M = M;
  a.N = o.N;
  a.K = o.K;
  return a;
}

void prefill(const k::MatmulArgs* parts, int count, int width) {
  ASSERT_TRUE(k::matmul_bf16_prefill(parts, count, cuda::cuda_stream(), width)) << "width " << width;
}

// y = x[row0 .. row0 + M) · wᵀ at `width`, contiguous [M, N].
std::vector<float> product(const Operands& o, int64_t row0, int64_t M, int width) {
  const DeviceBuffer y = poisoned(size_t(M * o.N));
  const k::MatmulArgs a = args(o, row0, M, y.as<float>(), o.N);
  prefill(&a, 1, width);
  return download(y, size_t(M * o.N));
}

bool wgmma_or_skip() { return k::wgmma_available(); }

struct WidthCase {
  int64_t M, N, K;
};

class PrefillWidths : public Gpu, public ::testing::WithParamInterface<WidthCase> {};

// Each width against the reference (y at columns [3, 3 + N) of rows N + 5 wide: the one-float stores, and
// nothing written beside y), then with y contiguous (the pair stores): 256's bits.
TEST_P(PrefillWidths, EachWidthAgreesWithTheReferenceAndHas256sBits) {
  const auto [M, N, K] = GetParam();
  if (!wgmma_or_skip()) GTEST_SKIP() << "not a compute capability 9.0 device";
  const Operands o = operands(M, N, K, 21);
  std::vector<float> xr(o.xh.size()), wr(o.wb.size());
  for (size_t i = 0; i < xr.size(); ++i) xr[i] = bf16_to_f32(f32_to_bf16(o.xh[i]));
  convert_to_f32(o.wb.data(), DType::BF16, wr.data(), wr.size());
  std::vector<double> ref(size_t(M * N)), mag(size_t(M * N));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = 0, a = 0;
      for (int64_t c = 0; c < K; ++c) {
        const double p = double(xr[size_t(m * K + c)]) * double(wr[size_t(n * K + c)]);
        s += p;
        a += std::fabs(p);
      }
      ref[size_t(m * N + n)] = s;
      mag[size_t(m * N + n)] = a;
    }
  const std::vector<float> bits256 = product(o, 0, M, 256);
  for (int width : kPrefillTileWidths) {
    SCOPED_TRACE("width " + std::to_string(width));
    const int64_t ld = N + 5;
    const DeviceBuffer y = poisoned(size_t(M * ld));
    const k::MatmulArgs a = args(o, 0, M, y.as<float>() + 3, ld);
    prefill(&a, 1, width);
    const auto got = download(y, size_t(M * ld));
    double worst = 0;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t c = 0; c < ld; ++c) {
        const float v = got[size_t(m * ld + c)];
        if (c < 3 || c >= 3 + N) {
          ASSERT_TRUE(std::isnan(v)) << "wrote outside y at row " << m << " column " << c;
          continue;
        }
        const size_t e = size_t(m * N + c - 3);
        ASSERT_TRUE(std::isfinite(v)) << "row " << m << " column " << c - 3 << " not written";
        worst = std::max(worst, std::fabs(v - ref[e]) / std::max(mag[e], 1e-30));
        ASSERT_EQ(std::memcmp(&v, &bits256[e], 4), 0)
            << "row " << m << " column " << c - 3 << ": " << v << " against " << bits256[e] << " at 256";
      }
    EXPECT_LT(worst, 1e-5) << "M " << M << " N " << N << " K " << K;
    const auto packed = product(o, 0, M, width);
    ASSERT_TRUE(bit_equal(packed.data(), bits256.data(), packed.size())) << "contiguous y";
  }
}

// One row; partial row and column tiles at every width (200, 300, 1000 columns); K off the 64 grid; several
// persistent rounds; N = 5,120 (the 27B's o_proj / out_proj / down width: 160 columns divide it).
INSTANTIATE_TEST_SUITE_P(Shapes, PrefillWidths,
                         ::testing::Values(WidthCase{1, 256, 512}, WidthCase{37, 200, 72}, WidthCase{130, 300, 1000},
                                           WidthCase{300, 1000, 1024}, WidthCase{257, 5120, 136},
                                           WidthCase{700, 4096, 256}));

// Bits, not closeness: long chains (K up to the 27B's 17,408) over data whose partial sums span many
// exponents, every width against 256, in launches of one weight and of five (two launches: four parts, then
// one) whose widths differ from the lone calls'.
TEST_F(Gpu, PrefillEveryWidthHas256sBitsOnLongChains) {
  if (!wgmma_or_skip()) GTEST_SKIP() << "not a compute capability 9.0 device";
  struct Shape {
    int64_t M, N, K;
  };
  for (const Shape s : {Shape{160, 640, 17408}, Shape{300, 5120, 6144}, Shape{2048, 5120, 512}}) {
    for (const bool wide : {false, true}) {
      SCOPED_TRACE("M " + std::to_string(s.M) + " N " + std::to_string(s.N) + " K " + std::to_string(s.K) +
                   (wide ? " wide" : ""));
      const Operands o = operands(s.M, s.N, s.K, 31, wide);
      const std::vector<float> ref = product(o, 0, s.M, 256);
      for (float v : ref) ASSERT_TRUE(std::isfinite(v));
      for (int width : kPrefillTileWidths)
        ASSERT_TRUE(bit_equal(product(o, 0, s.M, width).data(), ref.data(), ref.size())) << "width " << width;
    }
  }
  // Five weights sharing x (N, 48, 300, 1, 520): each part's bits at every width (0: the rule's, per launch)
  // are its lone call's at 256.
  const int64_t M = 200, K = 1000;
  const int64_t widths[] = {5120, 48, 300, 1, 520};
  std::vector<Operands> ops;
  for (size_t i = 0; i < std::size(widths); ++i) ops.push_back(operands(M, widths[i], K, 50 + uint32_t(i) * 2, true));
  auto part = [&](size_t i, float* y) {  // weight i on the first operands' x
    k::MatmulArgs a = args(ops[0], 0, M, y, ops[i].N);
    a.w = ops[i].w.data();
    a.N = ops[i].N;
    return a;
  };
  std::vector<std::vector<float>> alone;
  for (size_t i = 0; i < ops.size(); ++i) {
    const DeviceBuffer y = poisoned(size_t(M * ops[i].N));
    const k::MatmulArgs a = part(i, y.as<float>());
    prefill(&a, 1, 256);
    alone.push_back(download(y, size_t(M * ops[i].N)));
  }
  for (int width : {0, 256, 192, 160, 128}) {
    std::vector<DeviceBuffer> ys;
    std::vector<k::MatmulArgs> parts;
    for (size_t i = 0; i < ops.size(); ++i) {
      ys.push_back(poisoned(size_t(M * ops[i].N)));
      parts.push_back(part(i, ys.back().as<float>()));
    }
    prefill(parts.data(), int(parts.size()), width);
    for (size_t i = 0; i < ops.size(); ++i)
      ASSERT_TRUE(bit_equal(download(ys[i], alone[i].size()).data(), alone[i].data(), alone[i].size()))
          << "part " << i << " at width " << width;
  }
}

// The prefill rule at a narrow width: every row of one call equals the same row computed in calls cut
// elsewhere and at another offset among other rows, bit for bit.
TEST_F(Gpu, PrefillNarrowWidthsRowsDependOnTheRowOnly) {
  if (!wgmma_or_skip()) GTEST_SKIP() << "not a compute capability 9.0 device";
  const int64_t M = 300, N = 1000, K = 1024, big = 77 + M + 200;
  const Operands o = operands(big, N, K, 61, true);
  for (int width : {160, 128, 192}) {
    SCOPED_TRACE("width " + std::to_string(width));
    const std::vector<float> ref = product(o, 77, M, width);  // rows 77 .. 77 + M alone
    const DeviceBuffer cut = poisoned(size_t(M * N));
    for (int64_t b = 0, step = 1; b < M; step = step == 1 ? 7 : M) {  // calls of 1, 7, then the rest
      const int64_t e = std::min(M, b + step);
      const k::MatmulArgs a = args(o, 77 + b, e - b, cut.as<float>() + b * N, N);
      prefill(&a, 1, width);
      b = e;
    }
    ASSERT_TRUE(bit_equal(download(cut, size_t(M * N)).data(), ref.data(), ref.size())) << "chunked";
    const std::vector<float> all = product(o, 0, big, width);  // the same rows among others
    ASSERT_TRUE(bit_equal(all.data() + 77 * N, ref.data(), ref.size())) << "beside other rows";
  }
}

// Ops::matmul_prefill takes the rule's width (on an H200: 160 for N = 5,120) and has 256's bits.
TEST_F(Gpu, PrefillRulesWidthHas256sBits) {
  if (!wgmma_or_skip()) GTEST_SKIP() << "not a compute capability 9.0 device";
  const int64_t M = 400, N = 5120, K = 6144;
  const Operands o = operands(M, N, K, 71);
  SCOPED_TRACE("the rule's width here: " + std::to_string(prefill_tile_n(N, K, cuda::kernels::matmul_device().sms)));
  const DeviceBuffer y = poisoned(size_t(M * N));
  cuda_ops().matmul_prefill(dev_view(o.x, DType::F32, {M, K}), dev_view(o.w, DType::BF16, {N, K}),
                            dev_view(y, DType::F32, {M, N}));
  const std::vector<float> ref = product(o, 0, M, 256);
  ASSERT_TRUE(bit_equal(download(y, size_t(M * N)).data(), ref.data(), ref.size()));
}

TEST_F(Gpu, PrefillWidthOtherThanTheFourIsAnError) {
  const Operands o = operands(8, 64, 64, 81);
  const DeviceBuffer y = poisoned(size_t(8 * 64));
  const k::MatmulArgs a = args(o, 0, 8, y.as<float>(), 64);
  for (int width : {-1, 64, 200, 512}) EXPECT_THROW(k::matmul_bf16_prefill(&a, 1, cuda::cuda_stream(), width), Error);
}

}  // namespace
}  // namespace specserve::cuda_test
