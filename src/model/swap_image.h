#pragma once
// A swap image: the bytes of one sequence's device-side state (KV blocks, DeltaNet state, drafter
// context), set aside in host memory while the sequence is preempted (engine/swap.h) and copied back,
// bit for bit, when it resumes. One host block from Memory::allocate_host (pinned on a device), cut
// into 64-byte aligned regions taken in the same order on the way out and on the way back.
#include <cstddef>
#include <span>
#include <vector>

#include "backend/memory.h"

namespace specserve {

class SwapImage {
 public:
  SwapImage() = default;
  // `bytes` (the sum of its regions' region_bytes) of `mem`'s host memory (Memory::allocate_host).
  SwapImage(const Memory& mem, size_t bytes);
  ~SwapImage() { reset(); }
  SwapImage(SwapImage&& o) noexcept;
  SwapImage& operator=(SwapImage&& o) noexcept;
  SwapImage(const SwapImage&) = delete;
  SwapImage& operator=(const SwapImage&) = delete;

  // The bytes a region of `bytes` takes in an image (rounded up to 64).
  static size_t region_bytes(size_t bytes) { return (bytes + 63) / 64 * 64; }

  bool empty() const { return data_ == nullptr; }
  // The memory whose host blocks hold the image (and whose device the bytes came from).
  const Memory* memory() const { return mem_; }
  size_t bytes() const { return bytes_; }
  // The next region of `bytes` (in order); an Error when the image has no room left.
  void* next(size_t bytes);
  // Back to the first region (for reading the regions in the order they were written).
  void rewind() { cursor_ = 0; }
  // Frees the host block.
  void reset() noexcept;

 private:
  const Memory* mem_ = nullptr;
  char* data_ = nullptr;
  size_t bytes_ = 0;
  size_t cursor_ = 0;
};

}  // namespace specserve
