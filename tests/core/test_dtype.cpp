#include <gtest/gtest.h>
#include <immintrin.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>

#include "core/dtype.h"

using namespace specserve;

TEST(DType, NamesRoundTrip) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::F8_E4M3, DType::F8_E5M2, DType::F64, DType::I8,
                  DType::I16, DType::I32, DType::I64, DType::U8, DType::U16, DType::U32, DType::U64, DType::BOOL}) {
    auto parsed = parse_dtype(dtype_name(t));
    ASSERT_TRUE(parsed.has_value()) << dtype_name(t);
    EXPECT_EQ(*parsed, t);
  }
  EXPECT_FALSE(parse_dtype("F12").has_value());
  EXPECT_EQ(dtype_size(DType::BF16), 2u);
  EXPECT_EQ(dtype_size(DType::F8_E4M3), 1u);
}

// Reference bf16 rounding in double arithmetic: nearest representable, ties to even mantissa.
static uint16_t bf16_reference(float x) {
  uint32_t u = std::bit_cast<uint32_t>(x);
  uint16_t lo = static_cast<uint16_t>(u >> 16);
  uint16_t hi = static_cast<uint16_t>(lo + 1);
  double dx = x, dlo = bf16_to_f32(lo), dhi = bf16_to_f32(hi);
  double elo = std::fabs(dx - dlo), ehi = std::fabs(dhi - dx);
  if (elo < ehi) return lo;
  if (ehi < elo) return hi;
  return (lo & 1) ? hi : lo;
}

TEST(DType, Bf16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  // 1 + 2^-8 is exactly halfway between 1 and 1 + 2^-7: ties to even (1.0).
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  // 1 + 3*2^-8 is halfway between 1+2^-7 (odd) and 1+2^-6 (even): rounds up.
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::infinity())), std::numeric_limits<float>::infinity());
  std::mt19937 rng(1);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 200000; ++i) {
    float x = std::bit_cast<float>(bits(rng));
    if (!std::isfinite(x) || std::fabs(x) > 3.38e38f) continue;
    ASSERT_EQ(f32_to_bf16(x), bf16_reference(x)) << x;
  }
}

TEST(DType, F16ExhaustiveRoundTrip) {
  for (uint32_t h = 0; h < 65536; ++h) {
    float f = f16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(f))));
      continue;
    }
    ASSERT_EQ(f32_to_f16(f), h) << h;
  }
  EXPECT_EQ(f16_to_f32(f32_to_f16(65504.0f)), 65504.0f);
  EXPECT_TRUE(std::isinf(f16_to_f32(f32_to_f16(65520.0f))));
  EXPECT_EQ(f16_to_f32(f32_to_f16(std::ldexp(1.0f, -24))), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(f16_to_f32(f32_to_f16(std::ldexp(1.0f, -25))), 0.0f);                   // tie to even -> 0
}

TEST(DType, F16MatchesF16CHardware) {
  std::mt19937 rng(2);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 100000; ++i) {
    float x = std::bit_cast<float>(bits(rng));
    if (std::isnan(x)) continue;
    uint16_t hw = _cvtss_sh(x, 0);  // round to nearest even
    ASSERT_EQ(f32_to_f16(x), hw) << x;
  }
}

TEST(DType, E4M3) {
  EXPECT_EQ(e4m3_to_f32(0x7e), 448.0f);
  EXPECT_TRUE(std::isnan(e4m3_to_f32(0x7f)));
  EXPECT_EQ(e4m3_to_f32(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(e4m3_to_f32(0x38), 1.0f);
  for (int c = 0; c < 256; ++c) {
    float f = e4m3_to_f32(static_cast<uint8_t>(c));
    if (std::isnan(f) || c == 0x80) continue;  // -0 maps to itself too but compare value
    EXPECT_EQ(f32_to_e4m3(f), c) << c;
  }
  EXPECT_EQ(f32_to_e4m3(1000.0f), 0x7e);  // saturates
  EXPECT_EQ(f32_to_e4m3(-1000.0f), 0xfe);
}

TEST(DType, ConvertArrays) {
  float src[4] = {1.5f, -2.25f, 0.0f, 3.0f};
  uint16_t bf[4];
  convert_from_f32(src, DType::BF16, bf, 4);
  float back[4];
  convert_to_f32(bf, DType::BF16, back, 4);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(back[i], src[i]);
  int32_t ints[3] = {-1, 7, 100000};
  convert_to_f32(ints, DType::I32, back, 3);
  EXPECT_EQ(back[0], -1.0f);
  EXPECT_EQ(back[2], 100000.0f);
}
