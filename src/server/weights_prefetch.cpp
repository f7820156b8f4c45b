#include "server/weights_prefetch.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <vector>

namespace specserve::server {

uint64_t prefetch_weights(const std::string& dir, const std::function<void(uint64_t, uint64_t)>& progress) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.is_regular_file(ec) && entry.path().extension() == ".safetensors") {
      files.push_back(entry.path());
      total += entry.file_size(ec);
    }
  }
  std::sort(files.begin(), files.end());
  uint64_t done = 0;
  std::vector<char> buf(8u << 20);
  for (const auto& f : files) {
    int fd = ::open(f.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    for (;;) {
      ssize_t n = ::read(fd, buf.data(), buf.size());
      if (n <= 0) break;
      done += static_cast<uint64_t>(n);
      progress(done, total);
    }
    ::close(fd);
  }
  progress(total, total);
  return total;
}

}  // namespace specserve::server
