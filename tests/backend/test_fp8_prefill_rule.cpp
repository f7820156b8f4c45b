// The W8A8 prefill GEMM's activation rule (backend/cuda/matmul_fp8_act_math.cuh: plain C++, so it runs with the CPU
// tests, with or without the CUDA backend) and its host reference (fp8_prefill_reference.h): the
// e4m3 rounding (nearest even, ties both ways, subnormals, saturation, signed zeros, NaN) against hand-checked
// codes and against the loader's conversion (core/dtype.h), every code's value, the group scale's rule (amax / 448
// with the 2^-126 floor: a zero group, tiny groups), a group's largest element landing on ±448, and the host
// reference's row locality (a row's codes and scales do not depend on the other rows).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "fp8_prefill_reference.h"

namespace specserve {
namespace {

namespace fp8a = cuda::fp8a;
using specserve::testing::quantise_rows;

TEST(Fp8PrefillHost, RoundingHasTheHandCheckedCodes) {
  struct Case {
    float v;
    uint8_t code;
  };
  const Case cases[] = {
      {0.0f, 0x00},
      {-0.0f, 0x80},
      {1.0f, 0x38},  // exponent field 7, mantissa 0
      {-1.0f, 0xB8},
      {1.125f, 0x39},   // 1 + 1/8: the next code
      {1.0625f, 0x38},  // the tie between 1 and 1.125: to the even mantissa (0)
      {1.1875f, 0x3A},  // the tie between 1.125 and 1.25: to the even mantissa (2)
      {1.05f, 0x38},    // below the tie
      {1.0626f, 0x39},  // above it
      {448.0f, 0x7E},   // the largest finite value
      {432.0f, 0x7E},   // the tie between 416 and 448: even mantissa (6)
      {420.0f, 0x7D},   // 416
      {464.0f, 0x7E},   // past 448: saturates (not NaN, not 480)
      {1e6f, 0x7E},
      {-1e6f, 0xFE},
      {std::numeric_limits<float>::infinity(), 0x7E},
      {-std::numeric_limits<float>::infinity(), 0xFE},
      {0x1p-6f, 0x08},    // the smallest normal
      {0x1p-9f, 0x01},    // the smallest subnormal
      {0x1p-10f, 0x00},   // the tie between 0 and 2^-9: to even (0)
      {0x1.8p-9f, 0x02},  // 1.5 * 2^-9: the tie between 1 and 2 units: to 2
      {0x1.4p-9f, 0x01},  // 1.25 units
      {0x1.cp-7f, 0x07},  // 7 / 2^9 = 0.875 * 2^-6: the largest subnormal
      {0x1.ep-7f, 0x08},  // 7.5 units: the tie between 7 and 8: to 8 (the smallest normal)
      {0x1p-12f, 0x00},
      {-0x1p-12f, 0x80},  // rounds to -0
      {0.3f, 0x2A},       // 0.3 = 1.2 * 2^-2: mantissa 1.25 (2/8) -> field 5, mantissa 2
      {-96.0f, 0xEC},     // 1.5 * 2^6: field 13, mantissa 4
  };
  for (const Case& c : cases) EXPECT_EQ(int(fp8a::e4m3_rn_satfinite(c.v)), int(c.code)) << c.v;
  EXPECT_EQ(int(fp8a::e4m3_rn_satfinite(std::numeric_limits<float>::quiet_NaN())), 0x7F);
  EXPECT_EQ(int(fp8a::e4m3_rn_satfinite(-std::numeric_limits<float>::quiet_NaN())), 0xFF);
}

TEST(Fp8PrefillHost, EveryCodeRoundTripsAndHasTheLoadersValue) {
  for (int c = 0; c < 256; ++c) {
    const uint8_t code = static_cast<uint8_t>(c);
    if ((c & 0x7f) == 0x7f) {
      EXPECT_TRUE(std::isnan(fp8a::e4m3_value(code))) << c;
      continue;
    }
    const float v = fp8a::e4m3_value(code);
    EXPECT_EQ(v, e4m3_to_f32(code)) << c;
    EXPECT_EQ(int(fp8a::e4m3_rn_satfinite(v)), c) << c;
  }
}

// Midpoints between neighbouring codes (ties), points just off them, and random values of every magnitude: the
// rule's rounding is the loader's f32_to_e4m3 (round to nearest even, saturating), which core/dtype's tests check
// on their own.
TEST(Fp8PrefillHost, RoundingAgreesWithTheLoadersConversion) {
  std::vector<float> vs;
  for (int c = 0; c < 0x7E; ++c) {
    const float lo = fp8a::e4m3_value(uint8_t(c)), hi = fp8a::e4m3_value(uint8_t(c + 1));
    const float mid = (lo + hi) / 2;  // exact: both are short significands
    for (float v : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f), lo, hi}) {
      vs.push_back(v);
      vs.push_back(-v);
    }
  }
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  std::uniform_int_distribution<int> expo(-20, 10);
  for (int i = 0; i < 100000; ++i) vs.push_back((i % 2 ? -1.0f : 1.0f) * std::ldexp(mant(rng), expo(rng)));
  for (float v : vs) ASSERT_EQ(int(fp8a::e4m3_rn_satfinite(v)), int(f32_to_e4m3(v))) << v;
}

TEST(Fp8PrefillHost, GroupScaleRule) {
  EXPECT_EQ(fp8a::group_scale(448.0f), 1.0f);
  EXPECT_EQ(fp8a::group_scale(0.0f), 0x1p-126f);    // an all-zero group: the fixed floor
  EXPECT_EQ(fp8a::group_scale(1e-40f), 0x1p-126f);  // amax / 448 subnormal: the floor
  EXPECT_EQ(fp8a::group_scale(448.0f * 0x1p-126f), 0x1p-126f);
  EXPECT_EQ(fp8a::group_scale(1.0f), 1.0f / 448.0f);
  EXPECT_EQ(fp8a::group_scale(3.5f), 3.5f / 448.0f);
  EXPECT_EQ(fp8a::group_scale(std::numeric_limits<float>::infinity()), std::numeric_limits<float>::infinity());
  EXPECT_EQ(fp8a::code_pitch(4160), 4160);
  EXPECT_EQ(fp8a::code_pitch(37), 48);
  EXPECT_EQ(fp8a::scale_pitch(300), 300);
  EXPECT_EQ(fp8a::scale_pitch(1), 4);
  EXPECT_EQ(fp8a::groups_of(4096 + 64), 33);
}

// Every group's largest magnitude becomes ±448 (code 0x7E / 0xFE), zeros stay zeros, a group of zeros gets the
// floor; K's last group is short (K = 4096 + 64).
TEST(Fp8PrefillHost, QuantisedRowsFollowTheRule) {
  const int64_t M = 5, K = 4096 + 64;
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(size_t(M * K));
  for (auto& v : x) v = nd(rng);
  for (int64_t k = 128; k < 256; ++k) x[size_t(1 * K + k)] = 0.0f;                  // row 1, group 1: zeros
  for (int64_t k = 0; k < 128; ++k) x[size_t(2 * K + k)] *= 1e-39f;                 // row 2, group 0: subnormal
  for (int64_t k = 256; k < 384; ++k) x[size_t(3 * K + k)] = k % 2 ? 0.0f : -2.5f;  // row 3, group 2: equal values
  const auto q = quantise_rows(x.data(), K, M, K);
  ASSERT_EQ(q.groups, 33);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t g = 0; g < q.groups; ++g) {
      const int64_t k0 = g * 128, k1 = std::min(K, k0 + 128);
      float amax = 0;
      int64_t arg = k0;
      for (int64_t k = k0; k < k1; ++k)
        if (std::fabs(x[size_t(m * K + k)]) > amax) amax = std::fabs(x[size_t(m * K + k)]), arg = k;
      const float s = q.scales[size_t(m * q.groups + g)];
      if (amax == 0) {
        EXPECT_EQ(s, 0x1p-126f);
        for (int64_t k = k0; k < k1; ++k) EXPECT_EQ(q.codes[size_t(m * K + k)] & 0x7f, 0);
        continue;
      }
      if (amax >= 448.0f * 0x1p-126f) {
        EXPECT_EQ(q.codes[size_t(m * K + arg)] & 0x7f, 0x7E) << m << " " << g;
      }
      for (int64_t k = k0; k < k1; ++k) {
        const float v = x[size_t(m * K + k)];
        EXPECT_EQ(q.codes[size_t(m * K + k)], fp8a::e4m3_rn_satfinite(v / s));
        if (v == 0) {
          EXPECT_EQ(q.codes[size_t(m * K + k)] & 0x7f, 0);
        }
      }
    }
  EXPECT_EQ(q.scales[size_t(1 * q.groups + 1)], 0x1p-126f);
  EXPECT_EQ(q.scales[size_t(3 * q.groups + 2)], 2.5f / 448.0f);
  EXPECT_EQ(q.codes[size_t(3 * K + 256)], 0xFE);
  // Row locality: rows 2 .. 4 alone have the same codes and scales.
  const auto tail = quantise_rows(x.data() + 2 * K, K, M - 2, K);
  for (int64_t i = 0; i < (M - 2) * K; ++i) ASSERT_EQ(tail.codes[size_t(i)], q.codes[size_t(2 * K + i)]);
  for (int64_t i = 0; i < (M - 2) * q.groups; ++i)
    ASSERT_EQ(tail.scales[size_t(i)], q.scales[size_t(2 * q.groups + i)]);
}

// The host reference itself: with every activation an exact multiple of its group's scale (so quantisation is
// exact) and scales that are powers of two, the reference equals the plain f32-product sum in double.
TEST(Fp8PrefillHost, ReferenceIsTheExactProductSumForExactInputs) {
  const int64_t M = 3, N = 130, K = 300, groups = fp8a::groups_of(K);
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> small(-16, 16);
  std::vector<float> x(size_t(M * K));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k) x[size_t(m * K + k)] = float(small(rng)) * 0.25f;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t g = 0; g < groups; ++g) x[size_t(m * K + g * 128)] = 112.0f;  // amax 112: scale 1/4, exact
  std::vector<uint8_t> w(size_t(N * K));
  for (auto& c : w) c = fp8a::e4m3_rn_satfinite(float(small(rng)));
  const int64_t scale_ld = groups + 1;
  std::vector<float> ws(size_t(2 * scale_ld));
  for (size_t i = 0; i < ws.size(); ++i) ws[i] = std::ldexp(1.0f, int(i % 5) - 3);
  const auto q = quantise_rows(x.data(), K, M, K);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; n += 7) {
      double want = 0;
      for (int64_t k = 0; k < K; ++k)
        want += double(x[size_t(m * K + k)]) * fp8a::e4m3_value(w[size_t(n * K + k)]) *
                ws[size_t((n / 128) * scale_ld + k / 128)];
      const auto r = specserve::testing::fp8_prefill_reference(q, m, w.data(), K, ws.data(), scale_ld, n);
      EXPECT_EQ(r.y, want) << m << " " << n;
      EXPECT_GE(r.bound, std::fabs(r.y));
    }
}

}  // namespace
}  // namespace specserve
