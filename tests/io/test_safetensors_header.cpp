// The header parser and the length-prefix framing: one test per malformed case, plus the valid forms.
#include <gtest/gtest.h>

#include "io/safetensors.h"
#include "io_test_util.h"

namespace specserve {
namespace {

using test::expect_error;

SafetensorsHeader parse(const std::string& json, uint64_t data_size) {
  return parse_safetensors_header(json, data_size);
}

TEST(SafetensorsHeader, ParsesEntriesInOffsetOrderWithMetadata) {
  auto h = parse(R"({"b":{"dtype":"F32","shape":[2,3],"data_offsets":[8,32]},
                     "__metadata__":{"format":"pt"},
                     "a":{"dtype":"BF16","shape":[4],"data_offsets":[0,8]}})",
                 32);
  ASSERT_EQ(h.entries.size(), 2u);
  EXPECT_EQ(h.entries[0].name, "a");
  EXPECT_EQ(h.entries[0].dtype, DType::BF16);
  EXPECT_EQ(h.entries[0].shape, Shape({4}));
  EXPECT_EQ(h.entries[1].name, "b");
  EXPECT_EQ(h.entries[1].shape, Shape({2, 3}));
  EXPECT_EQ(h.entries[1].begin, 8u);
  EXPECT_EQ(h.entries[1].end, 32u);
  EXPECT_EQ(h.metadata.at("format"), "pt");
}

TEST(SafetensorsHeader, AcceptsEveryDtypeOfTheFormat) {
  const std::pair<const char*, DType> all[] = {
      {"BOOL", DType::BOOL},       {"U8", DType::U8},   {"I8", DType::I8},   {"F8_E5M2", DType::F8_E5M2},
      {"F8_E4M3", DType::F8_E4M3}, {"I16", DType::I16}, {"U16", DType::U16}, {"F16", DType::F16},
      {"BF16", DType::BF16},       {"I32", DType::I32}, {"U32", DType::U32}, {"F32", DType::F32},
      {"F64", DType::F64},         {"I64", DType::I64}, {"U64", DType::U64}};
  for (const auto& [name, dtype] : all) {
    size_t bytes = 3 * dtype_size(dtype);
    auto h = parse(fmt::format(R"({{"t":{{"dtype":"{}","shape":[3],"data_offsets":[0,{}]}}}})", name, bytes), bytes);
    ASSERT_EQ(h.entries.size(), 1u) << name;
    EXPECT_EQ(h.entries[0].dtype, dtype) << name;
  }
}

TEST(SafetensorsHeader, AcceptsEmptyHeaderScalarsAndZeroSizeTensors) {
  EXPECT_TRUE(parse("{}", 0).entries.empty());
  EXPECT_TRUE(parse("{}        ", 0).entries.empty());  // the writer pads with spaces
  auto h = parse(R"({"s":{"dtype":"F32","shape":[],"data_offsets":[0,4]},
                     "z":{"dtype":"F32","shape":[0,7],"data_offsets":[4,4]}})",
                 4);
  ASSERT_EQ(h.entries.size(), 2u);
  EXPECT_EQ(h.entries[0].shape.ndim, 0);
  EXPECT_EQ(h.entries[1].shape.numel(), 0);
}

TEST(SafetensorsHeader, RejectsBadJson) {
  expect_error([] { parse(R"({"a": {"dtype": )", 0); }, "header is not valid JSON");
  expect_error([] { parse("", 0); }, "header is not valid JSON");
}

TEST(SafetensorsHeader, RejectsNonObjectHeader) {
  expect_error([] { parse("[1,2]", 0); }, "header is an array, expected an object");
  expect_error([] { parse("42", 0); }, "header is an integer, expected an object");
}

TEST(SafetensorsHeader, RejectsNonObjectEntry) {
  expect_error([] { parse(R"({"w":[1,2]})", 0); }, "tensor 'w': entry is an array, expected an object");
}

TEST(SafetensorsHeader, RejectsMissingFields) {
  expect_error([] { parse(R"({"w":{"shape":[1],"data_offsets":[0,4]}})", 4); }, "tensor 'w': missing 'dtype'");
  expect_error([] { parse(R"({"w":{"dtype":"F32","data_offsets":[0,4]}})", 4); }, "tensor 'w': missing 'shape'");
  expect_error([] { parse(R"({"w":{"dtype":"F32","shape":[1]}})", 4); }, "tensor 'w': missing 'data_offsets'");
}

TEST(SafetensorsHeader, RejectsUnknownDtype) {
  expect_error([] { parse(R"({"w":{"dtype":"Q4_K","shape":[1],"data_offsets":[0,1]}})", 1); },
               "tensor 'w': unknown dtype 'Q4_K'");
  expect_error([] { parse(R"({"w":{"dtype":7,"shape":[1],"data_offsets":[0,1]}})", 1); },
               "'dtype' is an integer, expected a string");
}

TEST(SafetensorsHeader, NamesFormatDtypesSpecserveDoesNotSupport) {
  expect_error([] { parse(R"({"w":{"dtype":"F4","shape":[2],"data_offsets":[0,1]}})", 1); },
               "dtype 'F4' is not supported by specserve");
}

TEST(SafetensorsHeader, RejectsShapeTimesDtypeNotMatchingByteSize) {
  expect_error([] { parse(R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})", 20); },
               "tensor 'w': shape [2, 3] × F32 is 24 bytes, but data_offsets [0, 20] span 20 bytes");
}

TEST(SafetensorsHeader, RejectsNegativeDimension) {
  expect_error([] { parse(R"({"w":{"dtype":"F32","shape":[2,-3],"data_offsets":[0,0]}})", 0); },
               "shape dimension -3 is negative");
}

TEST(SafetensorsHeader, RejectsNonIntegerDimension) {
  expect_error([] { parse(R"({"w":{"dtype":"F32","shape":[2.5],"data_offsets":[0,0]}})", 0); },
               "shape dimension is a number, expected a non-negative integer");
  expect_error([] { parse(R"({"w":{"dtype":"F32","shape":["2"],"data_offsets":[0,0]}})", 0); },
               "shape dimension is a string, expected a non-negative integer");
  expect_error([] { parse(R"({"w":{"dtype":"F32","shape":{"a":1},"data_offsets":[0,0]}})", 0); },
               "'shape' is an object, expected an array");
}

TEST(SafetensorsHeader, RejectsOverflowingShape) {
  // Above int64 but a valid uint64.
  expect_error([] { parse(R"({"w":{"dtype":"F32","shape":[9223372036854775808],"data_offsets":[0,0]}})", 0); },
               "shape dimension 9223372036854775808 is too large");
  // Beyond uint64: JSON turns it into a float.
  expect_error([] { parse(R"({"w":{"dtype":"U8","shape":[184467440737095516160],"data_offsets":[0,0]}})", 0); },
               "expected a non-negative integer");
  // Each dimension fits, the product does not.
  expect_error([] { parse(R"({"w":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", 0); },
               "overflows the element count");
  // Fits in elements, overflows in bytes.
  expect_error([] { parse(R"({"w":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,0]}})", 0); },
               "overflows the byte size");
  // A zero dimension does not hide an overflowing product of the others (strides would overflow).
  expect_error([] { parse(R"({"w":{"dtype":"U8","shape":[0,4294967296,4294967296],"data_offsets":[0,0]}})", 0); },
               "overflows the element count");
}

TEST(SafetensorsHeader, RejectsRankAboveMaximum) {
  expect_error([] { parse(R"({"w":{"dtype":"U8","shape":[1,1,1,1,1,1,1],"data_offsets":[0,1]}})", 1); },
               "shape has 7 dimensions, more than the supported 6");
}

TEST(SafetensorsHeader, RejectsOffsetsOutOfRange) {
  expect_error([] { parse(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 12); },
               "data_offsets [0, 16] out of range: the data section is 12 bytes");
  expect_error([] { parse(R"({"w":{"dtype":"U8","shape":[0],"data_offsets":[8,4]}})", 12); },
               "data_offsets [8, 4] end before they begin");
  expect_error([] { parse(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0]}})", 1); },
               "'data_offsets' must be an array [begin, end]");
  expect_error([] { parse(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[-1,0]}})", 1); },
               "data_offsets begin -1 is negative");
}

TEST(SafetensorsHeader, RejectsOverlappingOffsets) {
  expect_error(
      [] {
        parse(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},
              "b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
              16);
      },
      "overlap tensor 'a' [0, 16]");
  // A zero-size tensor inside another is an overlap too.
  expect_error(
      [] {
        parse(R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},
              "b":{"dtype":"U8","shape":[0],"data_offsets":[4,4]}})",
              8);
      },
      "tensor 'b': data_offsets [4, 4] overlap");
}

TEST(SafetensorsHeader, RejectsGapsAndUncoveredBytes) {
  expect_error([] { parse(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})", 8); }, "leave a gap of 4 bytes");
  expect_error([] { parse(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})", 10); },
               "the data section is 10 bytes but the tensors cover only 4");
}

TEST(SafetensorsHeader, RejectsDuplicateNames) {
  expect_error(
      [] {
        parse(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},
              "a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
              2);
      },
      "duplicate tensor name 'a'");
  expect_error([] { parse(R"({"a":{"dtype":"U8","dtype":"F32","shape":[1],"data_offsets":[0,1]}})", 1); },
               "duplicate key 'dtype' in a header entry");
}

TEST(SafetensorsHeader, RejectsMalformedMetadata) {
  expect_error([] { parse(R"({"__metadata__":[1]})", 0); }, "'__metadata__' is an array, expected an object");
  expect_error([] { parse(R"({"__metadata__":{"k":3}})", 0); }, "'__metadata__' value of 'k' is an integer");
}

TEST(SafetensorsHeader, RejectsEmptyTensorName) {
  expect_error([] { parse(R"({"":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}})", 0); }, "empty name");
}

TEST(SafetensorsHeader, EscapesControlCharactersOfNamesInMessages) {
  std::string msg =
      expect_error([] { parse("{\"a\\nb\\u0001\":{\"dtype\":\"X\",\"shape\":[0],\"data_offsets\":[0,0]}}", 0); },
                   "tensor 'a\\x0ab\\x01': unknown dtype 'X'");
  EXPECT_EQ(msg.find('\x01'), std::string::npos);
}

TEST(SafetensorsFraming, SplitsFileIntoHeaderAndData) {
  std::string bytes = test::safetensors_bytes("{}      ", "abcd");
  auto f = read_safetensors_framing(bytes, bytes.size());
  EXPECT_EQ(f.header_size, 8u);
  EXPECT_EQ(f.data_offset, 16u);
  EXPECT_EQ(f.data_size, 4u);
}

TEST(SafetensorsFraming, RejectsTruncatedFile) {
  expect_error([] { read_safetensors_framing("abc", 3); }, "truncated: 3 bytes, too short");
  expect_error([] { read_safetensors_framing("", 0); }, "truncated: 0 bytes");
}

TEST(SafetensorsFraming, RejectsHeaderLengthBeyondFile) {
  std::string bytes = test::length_prefix(100) + "{}";
  expect_error([&] { read_safetensors_framing(bytes, bytes.size()); },
               "header length 100 runs past the end of the 10-byte file");
}

TEST(SafetensorsFraming, RejectsHugeHeaderLength) {
  std::string bytes = test::length_prefix(~0ull) + "{}";
  expect_error([&] { read_safetensors_framing(bytes, bytes.size()); },
               "header length 18446744073709551615 is above the 100000000-byte limit");
}

}  // namespace
}  // namespace specserve
