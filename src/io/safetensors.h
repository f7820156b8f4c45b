#pragma once
// safetensors: mmap'd, zero-copy reader; sharded checkpoints through model.safetensors.index.json;
// and a writer (tests and tools build checkpoints with it).
//
// Format: 8-byte little-endian header length N, N bytes of JSON
//   {name: {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {..}}
// then the data; offsets are relative to byte 8 + N.
// Validation follows the reference implementation (huggingface/safetensors): the tensors tile the
// data section exactly (first begins at 0, each begins where the previous ends, the last ends at the
// end of the file), so a file that loads here loads there and vice versa.
// Every malformed input is rejected with a one-line specserve::Error, never a crash.
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/tensor.h"

namespace specserve {

// Largest header accepted (the reference implementation's limit): a corrupt length field must not
// make us parse or allocate gigabytes.
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

struct SafetensorsEntry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin = 0;  // relative to the start of the data section
  uint64_t end = 0;
  uint64_t nbytes() const { return end - begin; }
};

struct SafetensorsHeader {
  std::vector<SafetensorsEntry> entries;  // in file order of offsets
  std::map<std::string, std::string> metadata;
};

// Where the parts of a file lie, from its 8-byte length prefix.
struct SafetensorsFraming {
  uint64_t header_size = 0;  // N
  uint64_t data_offset = 0;  // 8 + N
  uint64_t data_size = 0;    // file size - 8 - N
};

// Validates the length prefix (the first 8 bytes of `file_start`) against the file size: truncated
// file, header length beyond the file, header length above kMaxSafetensorsHeaderBytes.
SafetensorsFraming read_safetensors_framing(std::string_view file_start, uint64_t file_size);

// Parses and validates a header. `data_size` is the number of bytes after the header (so offsets
// can be range-checked). Throws Error on: bad JSON, non-object header or entries, unknown dtype,
// bad shape (negative, non-integer, overflowing), offsets out of range / overlapping / leaving gaps /
// not matching shape × dtype, duplicate names.
SafetensorsHeader parse_safetensors_header(std::string_view header_json, uint64_t data_size);

// How the kernel should treat a mapping (madvise). WillNeed starts read-ahead of the whole file,
// which is what a model load wants; Normal leaves pages to be faulted in on first touch, which is
// what a caller reading only the header (specserve info) wants.
enum class MapAdvice { Normal, WillNeed, Sequential, Random };

// One .safetensors file, memory-mapped read-only. As with any mapping, the file must not be
// truncated while it is open (reading a vanished page raises SIGBUS); replacing it by rename is safe.
class SafetensorsFile {
 public:
  static std::unique_ptr<SafetensorsFile> open(const std::string& path, MapAdvice advice = MapAdvice::WillNeed);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const SafetensorsHeader& header() const { return header_; }
  uint64_t file_size() const { return map_size_; }
  // The whole mapped file (header included), e.g. for cudaHostRegister before uploading weights.
  const uint8_t* mapped_bytes() const { return static_cast<const uint8_t*>(map_); }
  bool contains(std::string_view name) const;
  const SafetensorsEntry& entry(std::string_view name) const;  // throws Error when absent
  // Zero-copy view into the mapping; valid while this file is alive. The mapping is read-only: never
  // write through the view. A tensor whose offset is not a multiple of its element size (legal in
  // the format, never produced by the reference writer) is copied once into an aligned buffer, so
  // every view can be read through a typed pointer.
  TensorView view(std::string_view name) const;

 private:
  SafetensorsFile() = default;
  std::string path_;
  SafetensorsHeader header_;
  std::map<std::string, size_t, std::less<>> index_;
  void* map_ = nullptr;
  size_t map_size_ = 0;
  const uint8_t* data_ = nullptr;  // start of the data section
  mutable std::mutex aligned_copies_mutex_;
  mutable std::map<std::string, AlignedBuffer, std::less<>> aligned_copies_;
};

// A checkpoint directory: model.safetensors, or model.safetensors.index.json + shards, or (for
// drafters and tools) any set of *.safetensors files with distinct tensor names. Names map to views
// across shards. With an index, the index is authoritative: every name it lists must be in the shard
// it names, and tensors it does not list are not exposed.
class Checkpoint {
 public:
  static constexpr const char* kIndexFile = "model.safetensors.index.json";

  // `path` is a directory or a single .safetensors file.
  static std::unique_ptr<Checkpoint> open(const std::string& path, MapAdvice advice = MapAdvice::WillNeed);

  const std::string& path() const { return path_; }
  bool contains(std::string_view name) const;
  TensorView get(std::string_view name) const;  // throws Error naming the tensor when absent
  std::vector<std::string> names() const;       // sorted
  const SafetensorsEntry& entry(std::string_view name) const;
  const SafetensorsFile& file_of(std::string_view name) const;
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }

 private:
  size_t file_index(std::string_view name) const;
  void add_file_tensors(size_t file);  // maps every tensor of files_[file]; duplicates are errors
  void open_indexed(const std::string& dir, MapAdvice advice);
  std::string path_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, size_t, std::less<>> where_;  // name -> index into files_
};

// Collects named tensors and writes them as one file or as shards with an index. Like the reference
// writer, each file holds its tensors sorted by element size (largest first) then name, behind a
// header padded to a multiple of 8 bytes, so every tensor of a written file is aligned.
class SafetensorsWriter {
 public:
  // Copies the data of `v` (host, contiguous). A second tensor with the same name is an Error.
  void add(const std::string& name, const TensorView& v);
  void set_metadata(const std::string& key, const std::string& value);
  size_t size() const { return items_.size(); }
  // Writes one file (through a temporary file renamed into place, so a failure leaves no half file).
  void write(const std::string& path) const;
  // Writes shards "model-0000k-of-0000n.safetensors" of at most max_shard_bytes of data each (a
  // larger tensor gets a shard of its own; tensors go into shards in the order they were added) plus
  // model.safetensors.index.json into `dir`. Returns the shard file names.
  std::vector<std::string> write_sharded(const std::string& dir, uint64_t max_shard_bytes) const;

 private:
  struct Item {
    std::string name;
    DType dtype;
    Shape shape;
    std::vector<uint8_t> bytes;
  };
  void write_file(const std::string& path, std::vector<const Item*> items) const;
  std::vector<Item> items_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace specserve
