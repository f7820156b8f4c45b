// Qwen's block-128 fp8 format (io/fp8_blocks.h): e4m3 decoding of every bit pattern against the format's
// definition, block-scale dequantisation with ragged edges for every scale dtype and output dtype, the
// scale's name and shape, and the errors for a malformed weight / scale pair.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

#include "io/fp8_blocks.h"
#include "io_test_util.h"

namespace specserve {
namespace {

using test::expect_error;

// OCP e4m3 ("fn": finite, no infinities) by its definition, in double: sign, 4-bit exponent with bias 7,
// 3-bit mantissa; exponent 0 is subnormal (mantissa/8 × 2^-6); S.1111.111 is NaN, and nothing is infinite.
double e4m3_by_definition(int code) {
  const int sign = code >> 7, exponent = (code >> 3) & 15, mantissa = code & 7;
  if (exponent == 15 && mantissa == 7) return std::nan("");
  const double magnitude =
      exponent == 0 ? mantissa / 8.0 * std::pow(2.0, -6) : (1.0 + mantissa / 8.0) * std::pow(2.0, exponent - 7);
  return sign ? -magnitude : magnitude;
}

TEST(Fp8Blocks, EveryE4m3CodeDecodesToItsDefinition) {
  const float* table = e4m3_f32_table();
  int nans = 0, subnormals = 0;
  for (int code = 0; code < 256; ++code) {
    const double want = e4m3_by_definition(code);
    const float got = e4m3_to_f32(static_cast<uint8_t>(code));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << "code " << code;
      EXPECT_TRUE(std::isnan(table[code])) << "code " << code;
      ++nans;
      continue;
    }
    EXPECT_FALSE(std::isinf(got)) << "code " << code;
    EXPECT_EQ(static_cast<double>(got), want) << "code " << code;  // exact: every e4m3 value is an f32
    EXPECT_EQ(std::memcmp(&table[code], &got, 4), 0) << "code " << code;
    EXPECT_EQ(std::signbit(got), code >= 128) << "code " << code;  // 0x80 is -0
    if (((code >> 3) & 15) == 0 && (code & 7) != 0) ++subnormals;
  }
  EXPECT_EQ(nans, 2);  // 0x7F and 0xFF
  EXPECT_TRUE(std::isnan(e4m3_to_f32(0x7f)) && std::isnan(e4m3_to_f32(0xff)));
  EXPECT_EQ(subnormals, 14);
  EXPECT_EQ(e4m3_to_f32(0x7e), 448.0f);                // largest finite
  EXPECT_EQ(e4m3_to_f32(0x01), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_EQ(e4m3_to_f32(0x08), std::ldexp(1.0f, -6));  // smallest normal
}

TEST(Fp8Blocks, ScaleNameAndShape) {
  EXPECT_EQ(fp8_scale_name("model.layers.0.mlp.up_proj.weight"), "model.layers.0.mlp.up_proj.weight_scale_inv");
  EXPECT_EQ(fp8_scale_shape(Shape({128, 128})), Shape({1, 1}));
  EXPECT_EQ(fp8_scale_shape(Shape({300, 129})), Shape({3, 2}));
  EXPECT_EQ(fp8_scale_shape(Shape({4096, 12288})), Shape({32, 96}));
  EXPECT_EQ(fp8_scale_shape(Shape({1, 1})), Shape({1, 1}));
  expect_error([] { fp8_scale_name("model.layers.0.linear_attn.A_log"); }, "is not a weight");
  expect_error([] { fp8_scale_shape(Shape({4, 4, 4})); }, "an fp8 weight is a matrix");
}

// Random e4m3 codes (NaN excluded) and block scales of `scale_dtype`: each element of the result is the
// code's value times its block's scale, computed here element by element, then stored as `out`.
void check_dequantisation(int64_t rows, int64_t cols, DType scale_dtype, DType out) {
  std::mt19937 rng(static_cast<uint32_t>(rows * 1000 + cols));
  Tensor w = Tensor::empty(DType::F8_E4M3, {rows, cols});
  for (int64_t i = 0; i < w.view().numel(); ++i) {
    uint8_t code;
    do code = static_cast<uint8_t>(rng() & 0xff);
    while ((code & 0x7f) == 0x7f);
    w.as<uint8_t>()[i] = code;
  }
  const Shape grid = fp8_scale_shape(w.view().shape);
  Tensor scale_f32 = Tensor::empty(DType::F32, grid);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  for (int64_t i = 0; i < grid.numel(); ++i)  // varied magnitudes and full f32 mantissas
    scale_f32.as<float>()[i] = std::ldexp(mantissa(rng), static_cast<int>(rng() % 30) - 20);
  const Tensor scale = scale_dtype == DType::F32 ? to_f32(scale_f32) : from_f32(scale_f32, scale_dtype);
  const Tensor stored_scale = to_f32(scale);  // the scale values as the file holds them

  const Tensor got = dequantize_fp8_blocks(w, scale, out);
  ASSERT_EQ(got.view().dtype, out);
  ASSERT_EQ(got.view().shape, w.view().shape);
  const Tensor got_f32 = to_f32(got);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const float product = static_cast<float>(e4m3_by_definition(w.as<uint8_t>()[r * cols + c])) *
                            stored_scale.as<float>()[(r / 128) * grid[1] + c / 128];
      float want = product;
      if (out == DType::BF16) want = bf16_to_f32(f32_to_bf16(product));
      if (out == DType::F16) want = f16_to_f32(f32_to_f16(product));
      const float g = got_f32.as<float>()[r * cols + c];
      ASSERT_EQ(std::memcmp(&g, &want, 4), 0) << "row " << r << " col " << c << " of " << rows << "x" << cols << " "
                                              << dtype_name(scale_dtype) << " scales: " << g << " vs " << want;
      if (scale_dtype != DType::F32 && out == DType::F32)  // 4 × ≤ 11 significant bits: the product is exact
        ASSERT_EQ(static_cast<double>(g),
                  e4m3_by_definition(w.as<uint8_t>()[r * cols + c]) *
                      static_cast<double>(stored_scale.as<float>()[(r / 128) * grid[1] + c / 128]));
    }
}

TEST(Fp8Blocks, DequantisesBlocksWithRaggedEdgesForEveryScaleDtype) {
  for (DType scale_dtype : {DType::F32, DType::F16, DType::BF16}) {
    check_dequantisation(300, 200, scale_dtype, DType::F32);  // 3 × 2 blocks, the last row and column ragged
    check_dequantisation(128, 256, scale_dtype, DType::F32);  // whole blocks only
    check_dequantisation(5, 130, scale_dtype, DType::F32);    // one partial block row, a 2-column last block
    check_dequantisation(257, 3, scale_dtype, DType::BF16);   // a 1-row last block; bf16 output rounds once
    check_dequantisation(129, 129, scale_dtype, DType::F16);
  }
}

TEST(Fp8Blocks, EachBlockUsesItsOwnScale) {
  // Every code 0x38 (1.0): the result shows which scale each element took.
  Tensor w = Tensor::empty(DType::F8_E4M3, {200, 300});
  std::memset(w.as<uint8_t>(), 0x38, 200 * 300);
  Tensor s = Tensor::empty(DType::F32, {2, 3});
  for (int i = 0; i < 6; ++i) s.as<float>()[i] = static_cast<float>(i + 1);
  const Tensor d = dequantize_fp8_blocks(w, s, DType::F32);
  EXPECT_EQ(d.as<float>()[0], 1.0f);
  EXPECT_EQ(d.as<float>()[127], 1.0f);
  EXPECT_EQ(d.as<float>()[128], 2.0f);
  EXPECT_EQ(d.as<float>()[299], 3.0f);
  EXPECT_EQ(d.as<float>()[127 * 300 + 299], 3.0f);
  EXPECT_EQ(d.as<float>()[128 * 300], 4.0f);
  EXPECT_EQ(d.as<float>()[199 * 300 + 200], 5.0f);
  EXPECT_EQ(d.as<float>()[199 * 300 + 299], 6.0f);
}

TEST(Fp8Blocks, MalformedPairsAreErrors) {
  const Tensor w = Tensor::zeros(DType::F8_E4M3, {300, 200});
  expect_error(
      [&] {
        dequantize_fp8_blocks(w, Tensor::zeros(DType::F32, {2, 2}), DType::F32, "x.weight");
      },
      "the scale of fp8 weight 'x.weight' [300, 200] has shape [2, 2]; 128×128 blocks need [3, 2]");
  expect_error([&] { dequantize_fp8_blocks(w, Tensor::zeros(DType::F32, {6}), DType::F32, "x.weight"); },
               "has shape [6]");
  expect_error(
      [&] {
        dequantize_fp8_blocks(w, Tensor::zeros(DType::F8_E4M3, {3, 2}), DType::F32, "x.weight");
      },
      "has dtype F8_E4M3; scales must be F32, F16 or BF16");
  expect_error(
      [&] {
        dequantize_fp8_blocks(Tensor::zeros(DType::BF16, {4, 4}), Tensor::zeros(DType::F32, {1, 1}), DType::F32,
                              "x.weight");
      },
      "fp8 weight 'x.weight' is BF16[4, 4], expected a F8_E4M3 matrix");
  expect_error(
      [&] {
        dequantize_fp8_blocks(w, Tensor::zeros(DType::F32, {3, 2}), DType::F8_E4M3);
      },
      "fp8 weights dequantise to F32, F16 or BF16");
}

// A NaN code (0x7F, 0xFF) anywhere — the first 8-code word, the middle, a row's ragged tail, the last
// element — makes check_fp8_codes and dequantize_fp8_blocks throw, naming the weight, the code and the first
// such element; every other code passes (0x7E and 0xFE are ±448, 0x80 is -0).
TEST(Fp8Blocks, NaNCodesAreRefused) {
  std::mt19937 rng(9);
  for (const Shape shape : {Shape({300, 200}), Shape({5, 13}), Shape({1, 7}), Shape({129, 129})}) {
    Tensor w = Tensor::empty(DType::F8_E4M3, shape);
    uint8_t* q = w.as<uint8_t>();
    const int64_t n = shape.numel(), cols = shape[1];
    for (int64_t i = 0; i < n; ++i) {
      uint8_t code;
      do code = static_cast<uint8_t>(rng() & 0xff);
      while ((code & 0x7f) == 0x7f);
      q[i] = code;
    }
    q[0] = 0x7e;
    q[n - 1] = 0xfe;
    check_fp8_codes(w, "x.weight");
    const Tensor scale = Tensor::zeros(DType::F32, fp8_scale_shape(shape));
    EXPECT_EQ(dequantize_fp8_blocks(w, scale, DType::F32).view().shape, shape);
    for (const int64_t at : {int64_t{0}, int64_t{5}, n / 2 + 3, n - 1}) {
      for (const uint8_t nan : {uint8_t{0x7f}, uint8_t{0xff}}) {
        const uint8_t saved = q[at];
        q[at] = nan;
        if (at + 2 < n) q[at + 2] = 0xff;  // a later NaN code: the first one is named
        char where[96];
        std::snprintf(where, sizeof where, "NaN code 0x%02X at row %lld, column %lld", nan,
                      static_cast<long long>(at / cols), static_cast<long long>(at % cols));
        const std::string msg = expect_error([&] { check_fp8_codes(w, "x.weight"); }, where);
        EXPECT_NE(msg.find("'x.weight'"), std::string::npos) << msg;
        expect_error([&] { dequantize_fp8_blocks(w, scale, DType::BF16, "x.weight"); }, where);
        q[at] = saved;
        if (at + 2 < n) q[at + 2] = 0x00;
      }
    }
  }
  expect_error([] { check_fp8_codes(Tensor::zeros(DType::BF16, {4, 4}), "x.weight"); }, "expected a F8_E4M3 matrix");
}

}  // namespace
}  // namespace specserve
