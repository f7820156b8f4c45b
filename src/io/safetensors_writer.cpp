// SafetensorsWriter: single files and sharded checkpoints in the layout the reference writer produces.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/printable.h"
#include "io/safetensors.h"

namespace specserve {

namespace fs = std::filesystem;

namespace {

void write_all(std::ofstream& out, const void* data, size_t n, const std::string& path) {
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
  if (!out) fail("{}: write failed: {}", path, std::strerror(errno));
}

std::string shard_name(size_t k, size_t n) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", k, n);
  return buf;
}

// Writes through "<path>.tmp" and renames: readers never see a half-written file.
template <typename WriteBody>
void write_atomically(const std::string& path, WriteBody&& body) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail("{}: cannot create: {}", tmp, std::strerror(errno));
    body(out, tmp);
    out.flush();
    if (!out) fail("{}: write failed: {}", tmp, std::strerror(errno));
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) fail("{}: cannot rename into place: {}", path, ec.message());
}

}  // namespace

void SafetensorsWriter::add(const std::string& name, const TensorView& v) {
  SS_CHECK(!name.empty() && name != "__metadata__", "safetensors writer: invalid tensor name {}", quoted_name(name));
  SS_CHECK(v.device == Device::CPU, "safetensors writer: tensor {} is not on the host", quoted_name(name));
  SS_CHECK(v.is_contiguous(), "safetensors writer: tensor {} is not contiguous", quoted_name(name));
  SS_CHECK(v.valid(), "safetensors writer: tensor {} has no data", quoted_name(name));
  for (const auto& it : items_)
    SS_CHECK(it.name != name, "safetensors writer: duplicate tensor name {}", quoted_name(name));
  Item item{name, v.dtype, v.shape, {}};
  const auto* bytes = static_cast<const uint8_t*>(v.data);
  item.bytes.assign(bytes, bytes + v.nbytes());
  items_.push_back(std::move(item));
}

void SafetensorsWriter::set_metadata(const std::string& key, const std::string& value) { metadata_[key] = value; }

void SafetensorsWriter::write_file(const std::string& path, std::vector<const Item*> items) const {
  // Largest element size first, then by name (the reference writer's order): with the header padded
  // to 8 bytes, every tensor then starts at a multiple of its element size.
  std::stable_sort(items.begin(), items.end(), [](const Item* a, const Item* b) {
    size_t sa = dtype_size(a->dtype), sb = dtype_size(b->dtype);
    return sa != sb ? sa > sb : a->name < b->name;
  });
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata_.empty()) header["__metadata__"] = metadata_;
  uint64_t offset = 0;
  for (const Item* it : items) {
    std::vector<int64_t> shape(it->shape.dims.begin(), it->shape.dims.begin() + it->shape.ndim);
    header[it->name] = {
        {"dtype", dtype_name(it->dtype)}, {"shape", shape}, {"data_offsets", {offset, offset + it->bytes.size()}}};
    offset += it->bytes.size();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  uint8_t length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i));

  write_atomically(path, [&](std::ofstream& out, const std::string& tmp) {
    write_all(out, length, sizeof length, tmp);
    write_all(out, text.data(), text.size(), tmp);
    for (const Item* it : items) write_all(out, it->bytes.data(), it->bytes.size(), tmp);
  });
}

void SafetensorsWriter::write(const std::string& path) const {
  std::vector<const Item*> all;
  for (const auto& it : items_) all.push_back(&it);
  write_file(path, std::move(all));
}

std::vector<std::string> SafetensorsWriter::write_sharded(const std::string& dir, uint64_t max_shard_bytes) const {
  SS_CHECK(max_shard_bytes > 0, "safetensors writer: max_shard_bytes must be positive");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail("{}: cannot create directory: {}", dir, ec.message());

  std::vector<std::vector<const Item*>> shards;
  uint64_t current = 0;
  for (const auto& it : items_) {
    if (shards.empty() || (current > 0 && current + it.bytes.size() > max_shard_bytes)) {
      shards.emplace_back();
      current = 0;
    }
    shards.back().push_back(&it);
    current += it.bytes.size();
  }
  if (shards.empty()) shards.emplace_back();  // an empty checkpoint is still a valid one

  std::vector<std::string> names;
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  uint64_t total = 0;
  for (size_t k = 0; k < shards.size(); ++k) {
    names.push_back(shard_name(k + 1, shards.size()));
    for (const Item* it : shards[k]) {
      weight_map[it->name] = names.back();
      total += it->bytes.size();
    }
    write_file((fs::path(dir) / names.back()).string(), shards[k]);
  }
  nlohmann::ordered_json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  const std::string text = index.dump(2) + "\n";
  write_atomically((fs::path(dir) / Checkpoint::kIndexFile).string(),
                   [&](std::ofstream& out, const std::string& tmp) { write_all(out, text.data(), text.size(), tmp); });
  return names;
}

}  // namespace specserve
