// SafetensorsFile: one file mapped read-only; views point straight into the mapping.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "io/printable.h"
#include "io/safetensors.h"

namespace specserve {

namespace {

int madvise_flag(MapAdvice advice) {
  switch (advice) {
    case MapAdvice::WillNeed: return MADV_WILLNEED;
    case MapAdvice::Sequential: return MADV_SEQUENTIAL;
    case MapAdvice::Random: return MADV_RANDOM;
    case MapAdvice::Normal: break;
  }
  return MADV_NORMAL;
}

// Closes the descriptor on every path; the mapping outlives it.
struct FileDescriptor {
  int fd = -1;
  ~FileDescriptor() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::unique_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path, MapAdvice advice) {
  return with_context(path, [&] {
    FileDescriptor f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
    if (f.fd < 0) fail("cannot open: {}", std::strerror(errno));
    struct stat st {};
    if (::fstat(f.fd, &st) != 0) fail("cannot stat: {}", std::strerror(errno));
    if (!S_ISREG(st.st_mode)) fail("not a regular file");
    const auto file_size = static_cast<uint64_t>(st.st_size);
    // Checked before mapping: mmap of an empty file fails with a less helpful EINVAL.
    if (file_size < 8) fail("truncated: {} bytes, too short for the 8-byte header length", file_size);

    std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
    file->path_ = path;
    file->map_ = ::mmap(nullptr, file_size, PROT_READ, MAP_PRIVATE, f.fd, 0);
    if (file->map_ == MAP_FAILED) {
      file->map_ = nullptr;
      fail("cannot mmap {} bytes: {}", file_size, std::strerror(errno));
    }
    file->map_size_ = file_size;
    const auto* bytes = static_cast<const char*>(file->map_);
    SafetensorsFraming framing = read_safetensors_framing({bytes, 8}, file_size);
    file->header_ = parse_safetensors_header({bytes + 8, framing.header_size}, framing.data_size);
    file->data_ = reinterpret_cast<const uint8_t*>(bytes) + framing.data_offset;
    for (size_t i = 0; i < file->header_.entries.size(); ++i) file->index_.emplace(file->header_.entries[i].name, i);
    // Advice is a hint: a kernel that refuses it loads the same bytes, just with other read-ahead.
    if (advice != MapAdvice::Normal) ::madvise(file->map_, file_size, madvise_flag(advice));
    return file;
  });
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(map_, map_size_);
}

bool SafetensorsFile::contains(std::string_view name) const { return index_.find(name) != index_.end(); }

const SafetensorsEntry& SafetensorsFile::entry(std::string_view name) const {
  auto it = index_.find(name);
  if (it == index_.end()) fail("tensor {} not found in {}", quoted_name(name), path_);
  return header_.entries[it->second];
}

TensorView SafetensorsFile::view(std::string_view name) const {
  const SafetensorsEntry& e = entry(name);
  const uint8_t* bytes = data_ + e.begin;
  if (e.nbytes() != 0 && reinterpret_cast<uintptr_t>(bytes) % dtype_size(e.dtype) != 0) {
    std::lock_guard<std::mutex> lock(aligned_copies_mutex_);
    auto it = aligned_copies_.find(name);
    if (it == aligned_copies_.end()) {
      AlignedBuffer copy(e.nbytes());
      std::memcpy(copy.data(), bytes, e.nbytes());
      it = aligned_copies_.emplace(std::string(name), std::move(copy)).first;
    }
    bytes = static_cast<const uint8_t*>(it->second.data());
  }
  // const_cast: TensorView has no const flavour; the pages are PROT_READ, so a stray write faults
  // instead of silently corrupting a weight.
  return TensorView::contiguous(const_cast<uint8_t*>(bytes), e.dtype, e.shape);
}

}  // namespace specserve
