// The CPU matmul with block-scaled fp8 weights (ops.h, Ops::matmul; cpu/matmul_fp8.cpp): bit for bit the
// matmul of the bf16 dequantisation, close to the f32 dequantisation's exact product, rows invariant
// across M and threads, on odd shapes (K and N not multiples of 128, one row, one column); the per-block
// table it dequantises with (cpu/fp8_bf16_table.h) gives every finite code the definition's bits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/fp8_bf16_table.h"
#include "backend/cpu/matmul_kernels.h"
#include "backend/ops.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "fp8_test_weights.h"

namespace specserve {
namespace {

using testing::Fp8TestWeight;
using testing::make_fp8_weight;

Tensor random_x(int64_t M, int64_t K, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  Tensor x = Tensor::empty(DType::F32, {M, K});
  for (int64_t i = 0; i < x.numel(); ++i) x.as<float>()[i] = nd(rng);
  return x;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.as<void>(), b.as<void>(), a.nbytes()) == 0;
}

Tensor matmul(const TensorView& x, const TensorView& w) {
  Tensor y = Tensor::empty(DType::F32, {x.dim(0), w.dim(0)});
  cpu_ops().matmul(x, w, y);
  return y;
}

struct Dims {
  int64_t M, N, K;
};
// K below, at, across and far past a 128 block; N with partial row blocks; a single row and column.
const Dims kShapes[] = {{1, 13, 37},   {5, 70, 100},   {9, 300, 1000}, {4, 128, 128}, {3, 1, 17},
                        {1, 257, 384}, {17, 129, 130}, {33, 64, 520},  {2, 200, 8}};

// The table identity, for every finite code: under every bf16 scale in the table's range, a sweep of f32
// scales across it, and its edges; scales outside it get no table.
TEST(MatmulFp8, BlockTableGivesTheDefinitionsBits) {
  const float* value = e4m3_f32_table();
  int64_t tables = 0;
  auto check = [&](float s) {
    cpu::Fp8Bf16Table t;
    const bool ok = cpu::make_fp8_bf16_table(s, t);
    ASSERT_EQ(ok, s >= 0x1p-100f && s < 0x1p8f) << s;
    if (!ok) return;
    ++tables;
    for (int c = 0; c < 256; ++c) {
      if ((c & 0x7f) == 0x7f) continue;  // the NaN codes, which the loader refuses
      ASSERT_EQ(cpu::fp8_bf16_bits(static_cast<uint8_t>(c), t), f32_to_bf16(value[c] * s))
          << "scale " << s << " code " << c;
    }
  };
  for (uint32_t b = 0; b < 0x7f80; ++b) check(bf16_to_f32(static_cast<uint16_t>(b)));
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> exponent(-100.0f, 8.0f);
  for (int i = 0; i < 20000; ++i) check(std::exp2(exponent(rng)));
  for (float s : {0x1p-100f, std::nextafter(0x1p-100f, 0.0f), std::nextafter(0x1p8f, 0.0f), 0x1p8f, 0.0f, -1.0f})
    check(s);
  EXPECT_GT(tables, 20000);
}

TEST(MatmulFp8, DequantisesRowsToTheBitsOfTheDefinition) {
  // Every finite code, normal and tiny scales (subnormal products), runs of 128 and ragged tails.
  for (bool tiny : {false, true}) {
    const Fp8TestWeight w = make_fp8_weight(130, 300, 11, tiny);
    cpu::MatmulArgs a;
    a.w_fp8 = w.codes.as<const uint8_t>();
    a.w_scales = w.scales.as<const float>();
    a.scale_ld = w.scales.shape()[1];
    a.ldw = 300;
    a.K = 300;
    std::vector<uint16_t> out(static_cast<size_t>(130 * 300));
    cpu::dequantize_fp8_rows_bf16(a, 0, 130, out.data());
    ASSERT_EQ(0, std::memcmp(out.data(), w.bf16.as<uint16_t>(), out.size() * 2)) << (tiny ? "tiny scales" : "");
    // A row range from inside the weight.
    cpu::dequantize_fp8_rows_bf16(a, 127, 129, out.data());
    ASSERT_EQ(0, std::memcmp(out.data(), w.bf16.as<uint16_t>() + 127 * 300, 2 * 300 * 2));
  }
}

TEST(MatmulFp8, HasTheBitsOfTheBf16Dequantisation) {
  // Tiny and mixed scales too: blocks without a table (which take the multiply-and-round path) alone and beside
  // blocks with one.
  using testing::Fp8Scales;
  for (Fp8Scales kind : {Fp8Scales::F32, Fp8Scales::Tiny, Fp8Scales::Mixed})
    for (const Dims& d : kShapes) {
      const Fp8TestWeight w = make_fp8_weight(d.N, d.K, static_cast<uint32_t>(d.N * 7 + d.K), kind);
      const Tensor x = random_x(d.M, d.K, static_cast<uint32_t>(d.M + d.K));
      EXPECT_TRUE(same_bytes(matmul(x, w.view()), matmul(x, w.bf16)))
          << d.M << "x" << d.N << "x" << d.K << " scales " << int(kind);
    }
}

TEST(MatmulFp8, AgreesWithTheF32DequantisationsExactProduct) {
  for (const Dims& d : kShapes) {
    const Fp8TestWeight w = make_fp8_weight(d.N, d.K, static_cast<uint32_t>(d.N + 3 * d.K));
    const Tensor x = random_x(d.M, d.K, static_cast<uint32_t>(5 * d.M + d.K));
    const Tensor y = matmul(x, w.view());
    for (int64_t m = 0; m < d.M; ++m)
      for (int64_t n = 0; n < d.N; ++n) {
        double exact = 0, magnitude = 0;
        for (int64_t k = 0; k < d.K; ++k) {
          const double p = double(x.as<float>()[m * d.K + k]) * w.f32.as<float>()[n * d.K + k];
          exact += p;
          magnitude += std::fabs(p);
        }
        // bf16 weights (and, with AVX512-BF16, bf16 x): each product within 2 × 2^-8 relative.
        ASSERT_NEAR(y.as<float>()[m * d.N + n], exact, magnitude * 0x1p-7 + 1e-30)
            << d.M << "x" << d.N << "x" << d.K << " at " << m << "," << n;
      }
  }
}

TEST(MatmulFp8, RowsAreInvariantAcrossRowsAndThreads) {
  const int64_t N = 300, K = 1000, M = 32;
  const Fp8TestWeight w = make_fp8_weight(N, K, 21);
  const Tensor x = random_x(M, K, 22);
  const Tensor all = matmul(x, w.view());
  for (int64_t m : {int64_t{0}, int64_t{5}, int64_t{15}, int64_t{31}}) {
    const Tensor one = matmul(x.view().rows(m, m + 1), w.view());
    ASSERT_EQ(0, std::memcmp(one.as<float>(), all.as<float>() + m * N, N * 4)) << "row " << m << " alone";
  }
  const Tensor sixteen = matmul(x.view().rows(16, 32), w.view());
  ASSERT_EQ(0, std::memcmp(sixteen.as<float>(), all.as<float>() + 16 * N, 16 * N * 4)) << "rows 16-31 in 16";
  ThreadPool::set_global_threads(1);
  const Tensor single = matmul(x, w.view());
  ThreadPool::set_global_threads(3);
  const Tensor three = matmul(x, w.view());
  ThreadPool::set_global_threads(0);
  EXPECT_TRUE(same_bytes(single, all));
  EXPECT_TRUE(same_bytes(three, all));
}

TEST(MatmulFp8, MultiWithMixedWeightsEqualsSeparateCalls) {
  const int64_t M = 6, K = 260;
  const Fp8TestWeight a = make_fp8_weight(150, K, 31), c = make_fp8_weight(7, K, 33);
  const Tensor x = random_x(M, K, 34);
  Tensor b = Tensor::empty(DType::BF16, {90, K});
  std::memcpy(b.as<void>(), make_fp8_weight(90, K, 32).bf16.as<void>(), b.nbytes());
  Tensor ya = Tensor::empty(DType::F32, {M, 150}), yb = Tensor::empty(DType::F32, {M, 90}),
         yc = Tensor::empty(DType::F32, {M, 7});
  const TensorView ws[3] = {a.view(), b.view(), c.view()};
  const TensorView ys[3] = {ya.view(), yb.view(), yc.view()};
  cpu_ops().matmul_multi(x, ws, ys);
  EXPECT_TRUE(same_bytes(ya, matmul(x, a.bf16)));
  EXPECT_TRUE(same_bytes(yb, matmul(x, b)));
  EXPECT_TRUE(same_bytes(yc, matmul(x, c.bf16)));
}

TEST(MatmulFp8, RowRangesOfABlockScaledViewStartOnABlock) {
  const Fp8TestWeight w = make_fp8_weight(300, 140, 41);
  const TensorView tail = w.view().rows(128, 300);
  EXPECT_EQ(tail.scales, w.scales.as<const float>() + 2);  // the second row of the 3 x 2 grid
  EXPECT_EQ(tail.scale_shape(), Shape({2, 2}));
  const Tensor x = random_x(3, 140, 42);
  const Tensor full = matmul(x, w.view()), part = matmul(x, tail);
  for (int64_t m = 0; m < 3; ++m)
    ASSERT_EQ(0, std::memcmp(part.as<float>() + m * 172, full.as<float>() + m * 300 + 128, 172 * 4));
  EXPECT_THROW(w.view().rows(1, 300), Error);
}

TEST(MatmulFp8, RefusesFp8WithoutScalesAndScalesOnOtherDtypes) {
  const Fp8TestWeight w = make_fp8_weight(8, 16, 51);
  const Tensor x = random_x(1, 16, 52);
  Tensor y = Tensor::empty(DType::F32, {1, 8});
  EXPECT_THROW(cpu_ops().matmul(x, w.codes, y), Error);
  TensorView scaled_bf16 = w.bf16.view();
  scaled_bf16.scales = w.scales.as<const float>();
  EXPECT_THROW(cpu_ops().matmul(x, scaled_bf16, y), Error);
}

}  // namespace
}  // namespace specserve
