#include "model/swap_image.h"

#include <utility>

#include "core/error.h"

namespace specserve {

SwapImage::SwapImage(const Memory& mem, size_t bytes)
    : mem_(&mem), data_(static_cast<char*>(mem.allocate_host(bytes))), bytes_(bytes) {}

SwapImage::SwapImage(SwapImage&& o) noexcept
    : mem_(o.mem_),
      data_(std::exchange(o.data_, nullptr)),
      bytes_(std::exchange(o.bytes_, 0)),
      cursor_(std::exchange(o.cursor_, 0)) {}

SwapImage& SwapImage::operator=(SwapImage&& o) noexcept {
  if (this != &o) {
    reset();
    mem_ = o.mem_;
    data_ = std::exchange(o.data_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
    cursor_ = std::exchange(o.cursor_, 0);
  }
  return *this;
}

void* SwapImage::next(size_t bytes) {
  const size_t take = region_bytes(bytes);
  SS_CHECK(data_ != nullptr && cursor_ + take <= bytes_, "swap image: a {}-byte region past the end ({} of {} used)",
           bytes, cursor_, bytes_);
  void* p = data_ + cursor_;
  cursor_ += take;
  return p;
}

void SwapImage::reset() noexcept {
  if (data_) mem_->release_host(data_, bytes_);
  data_ = nullptr;
  bytes_ = 0;
  cursor_ = 0;
}

}  // namespace specserve
