// Checkpoint: the tensors of a directory (single file, index + shards, or loose files) by name.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "io/json_parse.h"
#include "io/printable.h"
#include "io/safetensors.h"

namespace specserve {

namespace fs = std::filesystem;

namespace {

std::string read_text_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) fail("cannot read {}", p.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Shard names come from a file we do not control: they must name a file next to the index, not a
// path that escapes the checkpoint directory.
void check_shard_name(const std::string& shard, const std::string& tensor) {
  if (shard.empty() || shard == "." || shard == ".." || shard.find('/') != std::string::npos ||
      shard.find('\\') != std::string::npos || shard.find('\0') != std::string::npos)
    fail("weight_map: tensor {} names shard {}, which is not a file name in the checkpoint directory",
         quoted_name(tensor), quoted_name(shard));
}

}  // namespace

std::unique_ptr<Checkpoint> Checkpoint::open(const std::string& path, MapAdvice advice) {
  auto ckpt = std::unique_ptr<Checkpoint>(new Checkpoint());
  ckpt->path_ = path;
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) {
    ckpt->files_.push_back(SafetensorsFile::open(path, advice));
    ckpt->add_file_tensors(0);
    return ckpt;
  }
  if (!fs::is_directory(path, ec)) fail("{}: no such checkpoint file or directory", path);
  const fs::path dir(path);
  if (fs::exists(dir / kIndexFile, ec)) {
    ckpt->open_indexed(path, advice);
    return ckpt;
  }
  std::vector<std::string> files;
  if (fs::exists(dir / "model.safetensors", ec)) {
    files.push_back((dir / "model.safetensors").string());
  } else {
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.is_regular_file() && e.path().extension() == ".safetensors") files.push_back(e.path().string());
    std::sort(files.begin(), files.end());  // directory order is arbitrary; errors should not be
  }
  if (ec) fail("{}: cannot list directory: {}", path, ec.message());
  if (files.empty()) fail("{}: no .safetensors file and no {}", path, kIndexFile);
  for (const auto& f : files) {
    ckpt->files_.push_back(SafetensorsFile::open(f, advice));
    ckpt->add_file_tensors(ckpt->files_.size() - 1);
  }
  return ckpt;
}

void Checkpoint::add_file_tensors(size_t file) {
  for (const auto& e : files_[file]->header().entries) {
    auto [it, inserted] = where_.emplace(e.name, file);
    if (!inserted)
      fail("{}: tensor {} is in both {} and {}", path_, quoted_name(e.name), files_[it->second]->path(),
           files_[file]->path());
  }
}

void Checkpoint::open_indexed(const std::string& dir, MapAdvice advice) {
  const fs::path index_path = fs::path(dir) / kIndexFile;
  with_context(index_path.string(), [&] {
    nlohmann::json index = parse_json(read_text_file(index_path), "index");
    if (!index.is_object()) fail("index is {}, expected an object", json_type_name(index));
    auto wm = index.find("weight_map");
    if (wm == index.end()) fail("missing key 'weight_map'");
    if (!wm->is_object()) fail("'weight_map' is {}, expected an object", json_type_name(*wm));
    std::map<std::string, size_t> shard_index;  // shard file name -> index into files_
    for (const auto& [tensor, shard_json] : wm->items()) {
      if (!shard_json.is_string())
        fail("weight_map: the shard of tensor {} is {}, expected a file name", quoted_name(tensor),
             json_type_name(shard_json));
      const auto& shard = shard_json.get_ref<const std::string&>();
      check_shard_name(shard, tensor);
      auto it = shard_index.find(shard);
      if (it == shard_index.end()) {
        const fs::path shard_path = fs::path(dir) / shard;
        std::error_code ec;
        if (!fs::exists(shard_path, ec))
          fail("missing shard {} (listed for tensor {})", quoted_name(shard), quoted_name(tensor));
        files_.push_back(SafetensorsFile::open(shard_path.string(), advice));
        it = shard_index.emplace(shard, files_.size() - 1).first;
      }
      if (!files_[it->second]->contains(tensor))
        fail("tensor {} is listed in shard {} but absent from it", quoted_name(tensor), quoted_name(shard));
      where_.emplace(tensor, it->second);
    }
  });
}

size_t Checkpoint::file_index(std::string_view name) const {
  auto it = where_.find(name);
  if (it == where_.end()) fail("tensor {} not found in checkpoint {}", quoted_name(name), path_);
  return it->second;
}

bool Checkpoint::contains(std::string_view name) const { return where_.find(name) != where_.end(); }

TensorView Checkpoint::get(std::string_view name) const { return files_[file_index(name)]->view(name); }

const SafetensorsEntry& Checkpoint::entry(std::string_view name) const { return files_[file_index(name)]->entry(name); }

const SafetensorsFile& Checkpoint::file_of(std::string_view name) const { return *files_[file_index(name)]; }

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  out.reserve(where_.size());
  for (const auto& [name, file] : where_) out.push_back(name);
  return out;  // std::map keeps them sorted
}

}  // namespace specserve
