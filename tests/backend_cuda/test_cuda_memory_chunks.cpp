// The device allocator (cuda_memory.cpp) carves classes below 64 MiB from chunks of whole 2 MiB pages:
// many small buffers (a 27B sequence's DeltaNet layers hold five under 1 MiB each) take about their bytes of
// device memory, not a driver page each; pieces of a class are reused after release; and every piece is
// usable memory of its size (written and read back whole, none overlapping another); cached blocks go back
// to the driver when an allocation would not fit otherwise.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <set>
#include <vector>

#include "backend/cuda/cuda_memory.h"
#include "cuda_test_util.h"

namespace specserve::cuda_test {
namespace {

size_t driver_free() {
  size_t free = 0, total = 0;
  EXPECT_EQ(cudaMemGetInfo(&free, &total), cudaSuccess);
  return free;
}

TEST_F(Gpu, SmallBuffersTakeAboutTheirBytes) {
  const Memory& mem = cuda_memory();
  // 1,500 buffers of 640 KiB (a 27B DeltaNet layer's presized extend rows) and 1,500 of 3 MiB (its state).
  for (const size_t bytes : {size_t{640} << 10, size_t{3} << 20}) {
    SCOPED_TRACE(bytes);
    const size_t n = 1500, before = driver_free();
    std::vector<Buffer> buffers;
    for (size_t i = 0; i < n; ++i) buffers.emplace_back(mem, bytes);
    const size_t taken = before - driver_free();
    // The pieces of the last chunk (up to 16) and the driver's page rounding of it at most beyond the bytes.
    EXPECT_LE(taken, n * bytes + 16 * bytes + (size_t{2} << 20)) << "device bytes taken for " << n * bytes;
    std::set<const char*> starts;
    for (const Buffer& b : buffers) starts.insert(static_cast<const char*>(b.data()));
    ASSERT_EQ(starts.size(), n);
    for (auto it = starts.begin(); std::next(it) != starts.end(); ++it)
      ASSERT_GE(static_cast<size_t>(*std::next(it) - *it), bytes) << "two pieces overlap";
    // Released pieces serve the next allocations of the class: no new device memory.
    buffers.erase(buffers.begin(), buffers.begin() + 100);
    const size_t mid = driver_free();
    for (size_t i = 0; i < 100; ++i) buffers.emplace_back(mem, bytes);
    EXPECT_EQ(driver_free(), mid);
  }
  // Every byte of a piece is its own: each of 64 pieces filled with its index reads back whole.
  const size_t bytes = size_t{96} << 10;
  std::vector<Buffer> pieces;
  for (int i = 0; i < 64; ++i) {
    pieces.emplace_back(mem, bytes);
    std::vector<unsigned char> fill(bytes, static_cast<unsigned char>(i));
    mem.upload(pieces.back().data(), fill.data(), bytes);
  }
  for (int i = 0; i < 64; ++i) {
    std::vector<unsigned char> back(bytes);
    mem.download(back.data(), pieces[size_t(i)].data(), bytes);
    ASSERT_TRUE(std::all_of(back.begin(), back.end(), [&](unsigned char c) { return c == i; })) << "piece " << i;
  }
}

// Released blocks stay cached by class; when the device is full a new allocation of any size, one of 256 MiB
// or more (allocated exactly) too, gets them back first instead of failing (an acceptance-controlled serving
// run ran out of memory in a 64-sequence pass that way, its earlier passes' blocks cached).
TEST_F(Gpu, ALargeAllocationTakesBackTheCachedBlocks) {
  const Memory& mem = cuda_memory();
  const size_t cls = size_t{96} << 20, leave = size_t{768} << 20;
  {
    std::vector<Buffer> fill;  // classes until less than `leave` is free, then all released (cached)
    while (driver_free() > leave + cls) fill.emplace_back(mem, cls);
    ASSERT_GT(fill.size(), 8u);
  }
  ASSERT_LT(driver_free(), leave + cls) << "released class blocks stay cached";
  const size_t big = size_t{4} << 30;  // more than is free, less than what is cached
  Buffer b(mem, big);
  EXPECT_NE(b.data(), nullptr);
}

// A released block of 256 MiB or more serves the next allocation of its size without the driver (a
// prefill chunk's largest activations recur every layer; cudaFree synchronised the device each time),
// counts as available memory, and goes back to the driver when an allocation would not fit otherwise.
TEST_F(Gpu, ALargeBlockIsReusedAndCountsAsAvailable) {
  const Memory& mem = cuda_memory();
  const size_t big = size_t{300} << 20;
  const void* first = nullptr;
  {
    Buffer b(mem, big);
    first = b.data();
  }
  const size_t free_after_release = driver_free();
  EXPECT_GE(mem.available_bytes(), free_after_release + big) << "the cached block counts as available";
  {
    Buffer again(mem, big);
    EXPECT_EQ(again.data(), first);
    EXPECT_EQ(driver_free(), free_after_release) << "served from the cache, not the driver";
  }
  // More than is free but less than free + the cached block: the cached block is given back first.
  const size_t rest = driver_free() + big / 2;
  Buffer fits(mem, rest);
  EXPECT_NE(fits.data(), nullptr);
}

}  // namespace
}  // namespace specserve::cuda_test
