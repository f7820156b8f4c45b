// SafetensorsFile: mapping, zero-copy views, and malformed files on disk (errors carry the path).
#include <gtest/gtest.h>

#include <cstring>

#include "io/safetensors.h"
#include "io_test_util.h"

namespace specserve {
namespace {

using test::expect_error;
using test::safetensors_bytes;
using test::TempDir;
using test::write_bytes;

std::string f32_bytes(std::initializer_list<float> values) {
  std::string s;
  for (float v : values) s.append(reinterpret_cast<const char*>(&v), sizeof v);
  return s;
}

TEST(SafetensorsFile, ViewsPointIntoTheMappingWithoutCopying) {
  TempDir dir;
  // Header padded to 8 bytes, as writers do, so both tensors are aligned.
  std::string header =
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  write_bytes(dir.file("t.safetensors"), safetensors_bytes(header, f32_bytes({1.5f, -2.f, 7.f})));

  auto f = SafetensorsFile::open(dir.file("t.safetensors"), MapAdvice::Normal);
  TensorView a = f->view("a"), b = f->view("b");
  EXPECT_EQ(a.dtype, DType::F32);
  EXPECT_EQ(a.shape, Shape({2}));
  EXPECT_EQ(a.as<float>()[0], 1.5f);
  EXPECT_EQ(a.as<float>()[1], -2.f);
  EXPECT_EQ(b.as<float>()[0], 7.f);
  // Both views live in one contiguous mapping at the header's offsets, and asking again gives the
  // same address: nothing was copied.
  EXPECT_EQ(static_cast<char*>(b.data) - static_cast<char*>(a.data), 8);
  EXPECT_EQ(f->view("a").data, a.data);
  EXPECT_EQ(f->file_size(), 8 + header.size() + 12);
  EXPECT_EQ(static_cast<const uint8_t*>(a.data), f->mapped_bytes() + 8 + header.size());
  EXPECT_TRUE(f->contains("a"));
  EXPECT_FALSE(f->contains("c"));
  expect_error([&] { f->view("c"); }, "tensor 'c' not found in " + dir.file("t.safetensors"));
}

TEST(SafetensorsFile, MisalignedTensorsAreCopiedToAlignedMemory) {
  TempDir dir;
  // A 9-byte header puts the data at byte 17: a legal file no reference writer would produce.
  std::string header =
      R"({"b":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"F32","shape":[2],"data_offsets":[1,9]}})";
  header.append((8 - header.size() % 8) % 8 + 1, ' ');
  std::string data = f32_bytes({3.f, 4.f});
  data.insert(data.begin(), '\x05');
  write_bytes(dir.file("t.safetensors"), safetensors_bytes(header, data));
  auto f = SafetensorsFile::open(dir.file("t.safetensors"));
  TensorView a = f->view("a");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data) % alignof(float), 0u);
  EXPECT_EQ(a.as<float>()[0], 3.f);
  EXPECT_EQ(a.as<float>()[1], 4.f);
  EXPECT_EQ(f->view("a").data, a.data);  // copied once
  EXPECT_EQ(f->view("b").as<uint8_t>()[0], 5);
}

TEST(SafetensorsFile, RejectsMissingFileAndDirectory) {
  TempDir dir;
  expect_error([&] { SafetensorsFile::open(dir.file("nope.safetensors")); }, "nope.safetensors: cannot open");
  expect_error([&] { SafetensorsFile::open(dir.path().string()); }, "not a regular file");
}

TEST(SafetensorsFile, RejectsTruncatedFiles) {
  TempDir dir;
  write_bytes(dir.file("empty.safetensors"), "");
  expect_error([&] { SafetensorsFile::open(dir.file("empty.safetensors")); },
               "empty.safetensors: truncated: 0 bytes, too short for the 8-byte header length");
  write_bytes(dir.file("short.safetensors"), std::string("\x10\0\0", 3));
  expect_error([&] { SafetensorsFile::open(dir.file("short.safetensors")); }, "truncated: 3 bytes");
  // Valid header, but the data was cut off.
  std::string full =
      safetensors_bytes(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", f32_bytes({1, 2, 3, 4}));
  write_bytes(dir.file("cut.safetensors"), full.substr(0, full.size() - 5));
  expect_error([&] { SafetensorsFile::open(dir.file("cut.safetensors")); },
               "cut.safetensors: tensor 'a': data_offsets [0, 16] out of range: the data section is 11 bytes");
}

TEST(SafetensorsFile, RejectsHeaderLengthBeyondFile) {
  TempDir dir;
  write_bytes(dir.file("t.safetensors"), test::length_prefix(4096) + "{}");
  expect_error([&] { SafetensorsFile::open(dir.file("t.safetensors")); },
               "header length 4096 runs past the end of the 10-byte file");
}

TEST(SafetensorsFile, RejectsHugeHeaderLength) {
  TempDir dir;
  write_bytes(dir.file("t.safetensors"), test::length_prefix(1ull << 40) + "{}");
  expect_error([&] { SafetensorsFile::open(dir.file("t.safetensors")); }, "is above the 100000000-byte limit");
}

TEST(SafetensorsFile, HeaderErrorsNameTheFile) {
  TempDir dir;
  write_bytes(dir.file("bad.safetensors"), safetensors_bytes("{not json", ""));
  expect_error([&] { SafetensorsFile::open(dir.file("bad.safetensors")); },
               dir.file("bad.safetensors") + ": header is not valid JSON");
  write_bytes(
      dir.file("dup.safetensors"),
      safetensors_bytes(
          R"({"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"x":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
          "ab"));
  expect_error([&] { SafetensorsFile::open(dir.file("dup.safetensors")); },
               "dup.safetensors: duplicate tensor name 'x'");
}

}  // namespace
}  // namespace specserve
