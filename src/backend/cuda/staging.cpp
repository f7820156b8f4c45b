#include "backend/cuda/staging.h"

#include <cuda_runtime.h>

#include <cstring>
#include <mutex>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_stream.h"

namespace specserve::cuda {

namespace {
constexpr size_t kSlots = 4;
std::mutex& as_mutex(void* p) { return *static_cast<std::mutex*>(p); }
}  // namespace

struct Staging::Slot {
  void* host = nullptr;  // pinned
  size_t bytes = 0;
  cudaEvent_t done = nullptr;  // recorded after the last copy out of `host`
  bool pending = false;
};

Staging& Staging::global() {
  static Staging* s = new Staging();  // never destroyed: ops may run during static destruction
  return *s;
}

Staging::Staging() : mutex_(new std::mutex) {
  for (size_t i = 0; i < kSlots; ++i) slots_.push_back(new Slot);
}

Staging::~Staging() {
  for (Slot* s : slots_) {
    if (s->done) cudaEventDestroy(s->done);
    if (s->host) cudaFreeHost(s->host);
    delete s;
  }
  if (device_) cudaFree(device_);
  delete static_cast<std::mutex*>(mutex_);
}

Staging::Lock Staging::lock() { return Lock(mutex_); }

Staging::Lock::Lock(void* mutex) : mutex_(mutex) { as_mutex(mutex_).lock(); }
Staging::Lock::~Lock() { as_mutex(mutex_).unlock(); }

void* Staging::stage(const void* host, size_t bytes) {
  if (bytes == 0) return nullptr;
  cudaStream_t stream = cuda_stream();
  if (bytes > device_bytes_) {
    // Kernels already queued may still read the old scratch.
    CUDA_CHECK(cudaStreamSynchronize(stream));
    if (device_) CUDA_CHECK(cudaFree(device_));
    device_ = nullptr;
    device_bytes_ = 0;
    size_t cap = 4096;
    while (cap < bytes) cap *= 2;
    CUDA_CHECK(cudaMalloc(&device_, cap));
    device_bytes_ = cap;
  }
  Slot& slot = *slots_[next_];
  next_ = (next_ + 1) % slots_.size();
  if (slot.done == nullptr) CUDA_CHECK(cudaEventCreateWithFlags(&slot.done, cudaEventDisableTiming));
  if (slot.pending) {
    CUDA_CHECK(cudaEventSynchronize(slot.done));
    slot.pending = false;
  }
  if (bytes > slot.bytes) {
    if (slot.host) CUDA_CHECK(cudaFreeHost(slot.host));
    slot.host = nullptr;
    slot.bytes = 0;
    size_t cap = 4096;
    while (cap < bytes) cap *= 2;
    CUDA_CHECK(cudaMallocHost(&slot.host, cap));
    slot.bytes = cap;
  }
  std::memcpy(slot.host, host, bytes);
  CUDA_CHECK(cudaMemcpyAsync(device_, slot.host, bytes, cudaMemcpyHostToDevice, stream));
  CUDA_CHECK(cudaEventRecord(slot.done, stream));
  slot.pending = true;
  return device_;
}

}  // namespace specserve::cuda
