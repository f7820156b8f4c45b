// Checkpoint directories (single file, index + shards, loose files) and the writer that makes them.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <numeric>

#include "io/safetensors.h"
#include "io_test_util.h"

namespace specserve {
namespace {

using test::expect_error;
using test::TempDir;
using test::write_bytes;

Tensor iota_f32(const Shape& shape, float start) {
  Tensor t = Tensor::empty(DType::F32, shape);
  std::iota(t.as<float>(), t.as<float>() + t.numel(), start);
  return t;
}

// Three tensors of 24, 16 and 8 bytes.
SafetensorsWriter three_tensor_writer() {
  SafetensorsWriter w;
  w.add("w.a", iota_f32({2, 3}, 0));
  w.add("w.b", iota_f32({4}, 100));
  w.add("w.c", iota_f32({2}, 200));
  return w;
}

void expect_three_tensors(const Checkpoint& c) {
  EXPECT_EQ(c.names(), (std::vector<std::string>{"w.a", "w.b", "w.c"}));
  TensorView a = c.get("w.a");
  EXPECT_EQ(a.shape, Shape({2, 3}));
  EXPECT_EQ(a.as<float>()[5], 5.f);
  EXPECT_EQ(c.get("w.b").as<float>()[3], 103.f);
  EXPECT_EQ(c.get("w.c").as<float>()[1], 201.f);
  EXPECT_EQ(c.entry("w.b").dtype, DType::F32);
}

TEST(SafetensorsWriter, RoundTripsEveryDtypeAligned) {
  TempDir dir;
  SafetensorsWriter w;
  const DType all[] = {DType::BOOL, DType::U8,  DType::I8,  DType::F8_E5M2, DType::F8_E4M3,
                       DType::I16,  DType::U16, DType::F16, DType::BF16,    DType::I32,
                       DType::U32,  DType::F32, DType::F64, DType::I64,     DType::U64};
  for (DType t : all) {
    Tensor x = Tensor::empty(t, {3});
    auto* bytes = x.as<uint8_t>();
    for (size_t i = 0; i < x.nbytes(); ++i) bytes[i] = static_cast<uint8_t>(i * 7 + static_cast<int>(t));
    w.add(std::string("t_") + std::string(dtype_name(t)), x);
  }
  w.set_metadata("format", "pt");
  w.write(dir.file("all.safetensors"));

  std::string raw = test::read_bytes(dir.file("all.safetensors"));
  uint64_t n = 0;
  std::memcpy(&n, raw.data(), 8);
  EXPECT_EQ((8 + n) % 8, 0u) << "header must be padded so the data starts 8-aligned";

  auto f = SafetensorsFile::open(dir.file("all.safetensors"));
  EXPECT_EQ(f->header().metadata.at("format"), "pt");
  ASSERT_EQ(f->header().entries.size(), std::size(all));
  size_t previous_size = 8;
  for (const auto& e : f->header().entries) {
    EXPECT_LE(dtype_size(e.dtype), previous_size) << "largest elements first";
    previous_size = dtype_size(e.dtype);
    EXPECT_EQ((8 + n + e.begin) % dtype_size(e.dtype), 0u) << e.name << " is misaligned";
    TensorView v = f->view(e.name);
    EXPECT_EQ(v.shape, Shape({3}));
    for (size_t i = 0; i < v.nbytes(); ++i)
      EXPECT_EQ(v.as<uint8_t>()[i], static_cast<uint8_t>(i * 7 + static_cast<int>(e.dtype))) << e.name;
  }
}

TEST(SafetensorsWriter, RejectsDuplicateAndNonContiguousTensors) {
  SafetensorsWriter w;
  Tensor x = iota_f32({2, 2}, 0);
  w.add("x", x);
  expect_error([&] { w.add("x", x); }, "duplicate tensor name 'x'");
  TensorView strided = x.view();
  strided.strides[0] = 1;
  strided.strides[1] = 2;  // a transpose
  expect_error([&] { w.add("y", strided); }, "tensor 'y' is not contiguous");
}

TEST(Checkpoint, OpensSingleFileAndDirectory) {
  TempDir dir;
  three_tensor_writer().write(dir.file("model.safetensors"));
  expect_three_tensors(*Checkpoint::open(dir.file("model.safetensors")));
  auto c = Checkpoint::open(dir.path().string());
  expect_three_tensors(*c);
  EXPECT_EQ(c->files().size(), 1u);
  expect_error([&] { c->get("w.z"); }, "tensor 'w.z' not found in checkpoint");
}

TEST(Checkpoint, OpensShardedCheckpointThroughIndex) {
  TempDir dir;
  auto shards = three_tensor_writer().write_sharded(dir.path().string(), 40);
  // 24 + 16 bytes fill the first shard; the 8-byte tensor starts a second one.
  EXPECT_EQ(shards, (std::vector<std::string>{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}));
  auto index = nlohmann::json::parse(test::read_bytes(dir.file("model.safetensors.index.json")));
  EXPECT_EQ(index["metadata"]["total_size"], 48);
  EXPECT_EQ(index["weight_map"]["w.c"], "model-00002-of-00002.safetensors");

  auto c = Checkpoint::open(dir.path().string());
  expect_three_tensors(*c);
  EXPECT_EQ(c->files().size(), 2u);
  EXPECT_NE(c->file_of("w.a").path(), c->file_of("w.c").path());
}

TEST(Checkpoint, OversizedTensorGetsItsOwnShard) {
  TempDir dir;
  auto shards = three_tensor_writer().write_sharded(dir.path().string(), 1);
  EXPECT_EQ(shards.size(), 3u);
  expect_three_tensors(*Checkpoint::open(dir.path().string()));
}

TEST(Checkpoint, OpensLooseFilesAndRejectsNamesInTwoOfThem) {
  TempDir dir;
  SafetensorsWriter a, b;
  a.add("x", iota_f32({1}, 1));
  b.add("y", iota_f32({1}, 2));
  a.write(dir.file("a.safetensors"));
  b.write(dir.file("b.safetensors"));
  auto c = Checkpoint::open(dir.path().string());
  EXPECT_EQ(c->names(), (std::vector<std::string>{"x", "y"}));
  b.add("x", iota_f32({1}, 3));
  b.write(dir.file("b.safetensors"));
  expect_error([&] { Checkpoint::open(dir.path().string()); }, "tensor 'x' is in both");
}

TEST(Checkpoint, RejectsMissingShard) {
  TempDir dir;
  auto shards = three_tensor_writer().write_sharded(dir.path().string(), 40);
  std::filesystem::remove(dir.file(shards[1]));
  expect_error(
      [&] { Checkpoint::open(dir.path().string()); },
      "model.safetensors.index.json: missing shard 'model-00002-of-00002.safetensors' (listed for tensor 'w.c')");
}

TEST(Checkpoint, RejectsNameInIndexAbsentFromShard) {
  TempDir dir;
  three_tensor_writer().write_sharded(dir.path().string(), 40);
  auto index = nlohmann::json::parse(test::read_bytes(dir.file("model.safetensors.index.json")));
  index["weight_map"]["w.ghost"] = "model-00001-of-00002.safetensors";
  write_bytes(dir.file("model.safetensors.index.json"), index.dump());
  expect_error([&] { Checkpoint::open(dir.path().string()); },
               "tensor 'w.ghost' is listed in shard 'model-00001-of-00002.safetensors' but absent from it");
}

TEST(Checkpoint, RejectsMalformedIndex) {
  TempDir dir;
  three_tensor_writer().write_sharded(dir.path().string(), 40);
  const std::string index = dir.file("model.safetensors.index.json");
  write_bytes(index, "{\"weight_map\": ");
  expect_error([&] { Checkpoint::open(dir.path().string()); }, "index is not valid JSON");
  write_bytes(index, "[]");
  expect_error([&] { Checkpoint::open(dir.path().string()); }, "index is an array, expected an object");
  write_bytes(index, R"({"metadata":{}})");
  expect_error([&] { Checkpoint::open(dir.path().string()); }, "missing key 'weight_map'");
  write_bytes(index, R"({"weight_map":{"w.a":3}})");
  expect_error([&] { Checkpoint::open(dir.path().string()); }, "the shard of tensor 'w.a' is an integer");
  write_bytes(index, R"({"weight_map":{"w.a":"../elsewhere/model.safetensors"}})");
  expect_error([&] { Checkpoint::open(dir.path().string()); }, "not a file name in the checkpoint directory");
}

TEST(Checkpoint, RejectsMalformedShard) {
  TempDir dir;
  auto shards = three_tensor_writer().write_sharded(dir.path().string(), 40);
  std::string bytes = test::read_bytes(dir.file(shards[0]));
  write_bytes(dir.file(shards[0]), bytes.substr(0, bytes.size() - 1));
  expect_error([&] { Checkpoint::open(dir.path().string()); }, shards[0] + ": tensor ");
}

TEST(Checkpoint, RejectsDirectoryWithoutWeights) {
  TempDir dir;
  expect_error([&] { Checkpoint::open(dir.path().string()); },
               "no .safetensors file and no model.safetensors.index.json");
  expect_error([&] { Checkpoint::open(dir.file("missing")); }, "no such checkpoint file or directory");
}

}  // namespace
}  // namespace specserve
