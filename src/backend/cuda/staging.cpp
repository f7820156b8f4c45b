#include "backend/cuda/staging.h"

#include <cuda_runtime.h>

#include <cstring>
#include <mutex>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_scope.h"
#include "backend/cuda/cuda_stream.h"
#include "backend/cuda/step_graphs.h"

namespace specserve::cuda {

namespace {
constexpr size_t kSegments = 64;
constexpr size_t kSegmentBytes = size_t{128} << 10;  // 8 MiB of ring in all
constexpr size_t kAlign = 256;
std::mutex& as_mutex(void* p) { return *static_cast<std::mutex*>(p); }
}  // namespace

struct Staging::Slot {
  cudaEvent_t done = nullptr;  // recorded after the last copy out of the segment
  bool pending = false;
};

Staging& Staging::global() {
  // The current device's (device_scope.h); never destroyed: ops may run during static destruction.
  static PerDevice<Staging> per;
  return per.get(current_device(), [](int) { return new Staging(); });
}

Staging::Staging() : mutex_(new std::mutex) {
  for (size_t i = 0; i < kSegments; ++i) segments_.push_back(new Slot);
  generation_.assign(kSegments, 0);
  recent_.assign(kRecentStages, Recent{0, 0, ~uint64_t{0}});
}

Staging::~Staging() {
  for (Slot* s : segments_) {
    if (s->done) cudaEventDestroy(s->done);
    delete s;
  }
  if (host_ring_) cudaFreeHost(host_ring_);
  if (device_ring_) cudaFree(device_ring_);
  if (big_host_) cudaFreeHost(big_host_);
  if (big_device_) cudaFree(big_device_);
  delete static_cast<std::mutex*>(mutex_);
}

Staging::Lock Staging::lock() { return Lock(mutex_); }

Staging::Lock::Lock(void* mutex) : mutex_(mutex) {
  as_mutex(mutex_).lock();
  hold_stages(+1);
}
Staging::Lock::~Lock() {
  hold_stages(-1);
  as_mutex(mutex_).unlock();
}

void* Staging::stage(const void* host, size_t bytes) {
  if (bytes == 0) return nullptr;
  // While launches are recorded, their metadata goes into the recording segment's own region.
  if (void* recorded = stage_for_launch(host, bytes)) return recorded;
  cudaStream_t stream = cuda_stream();
  if (bytes > kSegmentBytes) {
    // Kernels already queued may still read the big buffer, and its DMA may be pending.
    CUDA_CHECK(cudaStreamSynchronize(stream));
    if (bytes > big_bytes_) {
      if (big_host_) CUDA_CHECK(cudaFreeHost(big_host_));
      if (big_device_) CUDA_CHECK(cudaFree(big_device_));
      big_host_ = big_device_ = nullptr;
      big_bytes_ = 0;
      size_t cap = kSegmentBytes;
      while (cap < bytes) cap *= 2;
      CUDA_CHECK(cudaMallocHost(&big_host_, cap));
      CUDA_CHECK(cudaMalloc(&big_device_, cap));
      big_bytes_ = cap;
    }
    std::memcpy(big_host_, host, bytes);
    CUDA_CHECK(cudaMemcpyAsync(big_device_, big_host_, bytes, cudaMemcpyHostToDevice, stream));
    return big_device_;
  }
  if (host_ring_ == nullptr) {
    CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&host_ring_), kSegments * kSegmentBytes));
    CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&device_ring_), kSegments * kSegmentBytes));
    for (Slot* s : segments_) CUDA_CHECK(cudaEventCreateWithFlags(&s->done, cudaEventDisableTiming));
  }
  const size_t need = (bytes + kAlign - 1) / kAlign * kAlign;
  if (head_ + need > (segment_ + 1) * kSegmentBytes) {
    // Leave the segment: its copies are done when this event is.
    Slot& left = *segments_[segment_];
    CUDA_CHECK(cudaEventRecord(left.done, stream));
    left.pending = true;
    segment_ = (segment_ + 1) % kSegments;
    head_ = segment_ * kSegmentBytes;
    ++generation_[segment_];  // its earlier bytes are about to be overwritten
    Slot& next = *segments_[segment_];
    if (next.pending) {
      CUDA_CHECK(cudaEventSynchronize(next.done));
      next.pending = false;
    }
  }
  // The same bytes staged recently (a forward's layers stage identical positions and block tables)
  // are still on the device while their segment has not been re-entered: no second copy.
  for (const Recent& r : recent_)
    if (r.bytes == bytes && generation_[r.offset / kSegmentBytes] == r.generation &&
        std::memcmp(host_ring_ + r.offset, host, bytes) == 0)
      return device_ring_ + r.offset;
  std::memcpy(host_ring_ + head_, host, bytes);
  recent_[recent_next_] = {head_, bytes, generation_[segment_]};
  recent_next_ = (recent_next_ + 1) % recent_.size();
  void* dst = device_ring_ + head_;
  CUDA_CHECK(cudaMemcpyAsync(dst, host_ring_ + head_, bytes, cudaMemcpyHostToDevice, stream));
  head_ += need;
  return dst;
}

}  // namespace specserve::cuda
