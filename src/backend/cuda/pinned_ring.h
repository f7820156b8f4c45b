#pragma once
// The pinned host buffer step_graphs.cpp copies each segment's staged metadata from.
#include <cuda_runtime_api.h>

#include <cstddef>

namespace specserve::cuda::graphs {

// Pinned host memory the staging regions are copied from: a ring of chunks, each guarded by an event
// recorded when the ring leaves it, so the host waits only when it comes back to a chunk whose copies
// the stream has not yet run (a whole ring, 16 MiB of staged bytes, later).
class PinnedRing {
 public:
  static constexpr size_t kChunkBytes = size_t{1} << 20;
  static constexpr size_t kAlign = 64;
  // Room for `n` (<= kChunkBytes) bytes whose copy is enqueued on `stream` next.
  char* take(size_t n, cudaStream_t stream);

 private:
  static constexpr size_t kChunks = 16;
  char* base_ = nullptr;
  size_t chunk_ = 0, head_ = 0;
  cudaEvent_t done_[kChunks] = {};
  bool pending_[kChunks] = {};
};

}  // namespace specserve::cuda::graphs
