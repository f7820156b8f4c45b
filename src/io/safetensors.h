#pragma once
// safetensors: mmap'd, zero-copy reader; sharded checkpoints through model.safetensors.index.json;
// and a writer (tests and tools build checkpoints with it).
//
// Format: 8-byte little-endian header length N, N bytes of JSON
//   {name: {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {..}}
// then the data; offsets are relative to byte 8 + N.
// Every malformed input is rejected with a one-line specserve::Error, never a crash.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"

namespace specserve {

struct SafetensorsEntry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin = 0;  // relative to the start of the data section
  uint64_t end = 0;
};

struct SafetensorsHeader {
  std::vector<SafetensorsEntry> entries;  // in file order of offsets
  std::map<std::string, std::string> metadata;
};

// Parses and validates a header. `data_size` is the number of bytes after the header (so offsets
// can be range-checked). Throws Error on: bad JSON, non-object entries, unknown dtype, bad shape,
// offsets out of range / overlapping / not matching shape × dtype, duplicate names.
SafetensorsHeader parse_safetensors_header(std::string_view header_json, uint64_t data_size);

// One .safetensors file, memory-mapped read-only.
class SafetensorsFile {
 public:
  static std::unique_ptr<SafetensorsFile> open(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const SafetensorsHeader& header() const { return header_; }
  bool contains(std::string_view name) const;
  // Zero-copy view into the mapping; valid while this file is alive.
  TensorView view(std::string_view name) const;

 private:
  SafetensorsFile() = default;
  std::string path_;
  SafetensorsHeader header_;
  std::map<std::string, size_t, std::less<>> index_;
  void* map_ = nullptr;
  size_t map_size_ = 0;
  const uint8_t* data_ = nullptr;  // start of the data section
};

// A checkpoint directory: model.safetensors, or model.safetensors.index.json + shards, or (for
// drafters and tools) any single *.safetensors file. Names map to views across shards.
class Checkpoint {
 public:
  // `path` is a directory or a single .safetensors file.
  static std::unique_ptr<Checkpoint> open(const std::string& path);

  bool contains(std::string_view name) const;
  TensorView get(std::string_view name) const;  // throws Error naming the tensor when absent
  std::vector<std::string> names() const;       // sorted
  const SafetensorsEntry& entry(std::string_view name) const;
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, size_t, std::less<>> where_;  // name -> index into files_
};

// Collects named tensors and writes them as one file or as shards with an index.
class SafetensorsWriter {
 public:
  // Copies the data of `v` (host, contiguous).
  void add(const std::string& name, const TensorView& v);
  void set_metadata(const std::string& key, const std::string& value);
  // Writes one file.
  void write(const std::string& path) const;
  // Writes shards "model-0000k-of-0000n.safetensors" of at most max_shard_bytes of data each plus
  // model.safetensors.index.json into `dir`. Returns the shard file names.
  std::vector<std::string> write_sharded(const std::string& dir, uint64_t max_shard_bytes) const;

 private:
  struct Item {
    std::string name;
    DType dtype;
    Shape shape;
    std::vector<uint8_t> bytes;
  };
  std::vector<Item> items_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace specserve
