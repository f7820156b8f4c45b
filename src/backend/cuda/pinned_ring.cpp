#include "backend/cuda/pinned_ring.h"

#include <cuda_runtime.h>

#include "backend/cuda/cuda_check.h"

namespace specserve::cuda::graphs {

char* PinnedRing::take(size_t n, cudaStream_t stream) {
  if (base_ == nullptr) {
    CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&base_), kChunks * kChunkBytes));
    for (auto& e : done_) CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  }
  if (head_ + n > kChunkBytes) {
    CUDA_CHECK(cudaEventRecord(done_[chunk_], stream));
    pending_[chunk_] = true;
    chunk_ = (chunk_ + 1) % kChunks;
    head_ = 0;
    if (pending_[chunk_]) {
      CUDA_CHECK(cudaEventSynchronize(done_[chunk_]));
      pending_[chunk_] = false;
    }
  }
  char* p = base_ + chunk_ * kChunkBytes + head_;
  head_ += (n + kAlign - 1) / kAlign * kAlign;
  return p;
}

}  // namespace specserve::cuda::graphs
