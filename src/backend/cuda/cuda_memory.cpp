#include "backend/cuda/cuda_memory.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <bit>
#include <map>
#include <mutex>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_stream.h"
#include "backend/cuda/device_scope.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/fp8_arrange.h"
#include "backend/cuda/synthetic_fill_e4m3.h"
#include "backend/cuda/staging.h"
#include "backend/cuda/step_graphs.h"
#include "core/error.h"

namespace specserve {

namespace {

// Blocks of 256 MiB and more are allocated at their exact size and, released, cached by that size (a
// prefill chunk's largest activations recur at the same sizes every layer: 4,096 rows of the 27B's MLP
// are 285 MB; freeing each with cudaFree synchronised the device every layer, ~44 ms of GPU idle gaps in
// an 8,192-token prefill in chunks of 4,096: session 21's trace). trim() gives them back too.
constexpr size_t kExactFrom = size_t{256} << 20;
constexpr size_t kMinClass = 512;
constexpr size_t kKernelCopyBytes = size_t{1} << 20;
constexpr size_t kPinnedCacheBytes = size_t{4} << 30;  // released swap images kept pinned (allocate_host)

// Classes below kCarveBelow are carved from chunks (one cudaMalloc of a whole number of 2 MiB pages holding
// up to 16 pieces of the class): the driver backs every cudaMalloc with whole 2 MiB pages, so a 27B
// sequence's DeltaNet buffers (48 layers x seven: two of 3 MiB, five under 1 MiB) took ~1.7x their bytes
// one by one, and a serving start-up sized by their bytes ran out of device memory. trim() gives back the
// chunks whose pieces are all free.
constexpr size_t kCarveBelow = size_t{64} << 20;
constexpr size_t kPage = size_t{2} << 20;
size_t carve_chunk(size_t cls) {
  const size_t pieces = std::clamp<size_t>(kCarveBelow / cls, 1, 16);
  return (pieces * cls + kPage - 1) / kPage * kPage;
}

// The size class of `bytes`: rounded up to a multiple of 1/8 of its power of two.
size_t size_class(size_t bytes) {
  if (bytes <= kMinClass) return kMinClass;
  const size_t top = std::bit_floor(bytes);
  const size_t step = top >= 8 ? top / 8 : 1;
  return (bytes + step - 1) / step * step;
}

// One a device (device_scope.h): its calls run with its device current, on that device's stream.
class CudaMemory final : public Memory {
 public:
  explicit CudaMemory(int device) : device_(device) {}
  Device device() const override { return Device::CUDA; }
  int enter_device() const override { return cuda::make_current(device_); }
  int device_index() const override { return device_; }
  void leave_device(int previous) const noexcept override { cuda::restore_current(previous); }

  void* allocate(size_t bytes) const override {
    const cuda::DeviceScope scope(device_);
    if (bytes >= kExactFrom) {
      {
        std::lock_guard lock(mutex_);
        auto it = large_free_.find(bytes);
        if (it != large_free_.end() && !it->second.empty()) {
          void* p = it->second.back();
          it->second.pop_back();
          return p;
        }
      }
      void* p = nullptr;
      CUDA_CHECK(malloc_or_trim(&p, bytes));
      std::lock_guard lock(mutex_);
      reserved_ += bytes;
      return p;
    }
    const size_t cls = size_class(bytes);
    {
      std::lock_guard lock(mutex_);
      auto& list = free_[cls];
      if (!list.empty()) {
        void* p = list.back();
        list.pop_back();
        if (cls < kCarveBelow) --chunk_of(p).free;
        return p;
      }
    }
    const size_t bytes_new = cls < kCarveBelow ? carve_chunk(cls) : cls;
    void* p = nullptr;
    CUDA_CHECK(malloc_or_trim(&p, bytes_new));
    std::lock_guard lock(mutex_);
    reserved_ += bytes_new;
    if (cls < kCarveBelow) {  // a chunk: the first piece is the caller's, the rest wait in the class's list
      auto& list = free_[cls];
      size_t pieces = 1;
      for (size_t off = cls; off + cls <= bytes_new; off += cls, ++pieces) list.push_back(static_cast<char*>(p) + off);
      chunks_[static_cast<char*>(p)] = Chunk{cls, bytes_new, pieces, pieces - 1};
    }
    return p;
  }

  void release(void* p, size_t bytes) const noexcept override {
    if (!p) return;
    if (bytes >= kExactFrom) {  // kept for the next allocation of these bytes (stream order, as the classes)
      std::lock_guard lock(mutex_);
      large_free_[bytes].push_back(p);
      return;
    }
    std::lock_guard lock(mutex_);
    const size_t cls = size_class(bytes);
    free_[cls].push_back(p);
    if (cls < kCarveBelow) ++chunk_of(p).free;
  }

  void upload(void* dst, const void* host, size_t bytes) const override {
    const cuda::DeviceScope scope(device_);
    if (!bytes) return;
    CUDA_CHECK(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, cuda::cuda_stream()));
    // The source may be pageable and reused by the caller right away.
    CUDA_CHECK(cudaStreamSynchronize(cuda::cuda_stream()));
  }
  void download(void* host, const void* src, size_t bytes) const override {
    const cuda::DeviceScope scope(device_);
    if (!bytes) return;
    CUDA_CHECK(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, cuda::cuda_stream()));
    CUDA_CHECK(cudaStreamSynchronize(cuda::cuda_stream()));
  }
  // Swap space (engine/swap.h): pinned host blocks, so the copies below are true asynchronous DMA on
  // the stream, in order with the kernels that wrote (or will read) the device side. Pinning is slow
  // (page-locking hundreds of MiB takes tens of ms), so released blocks are kept by size class, up to
  // kPinnedCacheBytes, for the next swap-out.
  void* allocate_host(size_t bytes) const override {
    const cuda::DeviceScope scope(device_);
    const size_t cls = size_class(std::max<size_t>(bytes, 1));
    {
      std::lock_guard lock(mutex_);
      auto& list = pinned_free_[cls];
      if (!list.empty()) {
        void* p = list.back();
        list.pop_back();
        pinned_cached_ -= cls;
        return p;
      }
    }
    void* p = nullptr;
    CUDA_CHECK(cudaHostAlloc(&p, cls, cudaHostAllocDefault));
    return p;
  }
  void release_host(void* p, size_t bytes) const noexcept override {
    if (!p) return;
    const size_t cls = size_class(std::max<size_t>(bytes, 1));
    {
      std::lock_guard lock(mutex_);
      if (pinned_cached_ + cls <= kPinnedCacheBytes) {
        pinned_free_[cls].push_back(p);
        pinned_cached_ += cls;
        return;
      }
    }
    cudaFreeHost(p);
  }
  void download_many(std::span<const CopyRegion> regions) const override {
    const cuda::DeviceScope scope(device_);
    for (const auto& r : regions)
      if (r.bytes) CUDA_CHECK(cudaMemcpyAsync(r.dst, r.src, r.bytes, cudaMemcpyDeviceToHost, cuda::cuda_stream()));
    CUDA_CHECK(cudaStreamSynchronize(cuda::cuda_stream()));
  }
  void upload_many(std::span<const CopyRegion> regions) const override {
    const cuda::DeviceScope scope(device_);
    for (const auto& r : regions)
      if (r.bytes) CUDA_CHECK(cudaMemcpyAsync(r.dst, r.src, r.bytes, cudaMemcpyHostToDevice, cuda::cuda_stream()));
    // The host side is released by the caller right after.
    CUDA_CHECK(cudaStreamSynchronize(cuda::cuda_stream()));
  }
  void copy(void* dst, const void* src, size_t bytes) const override {
    const cuda::DeviceScope scope(device_);
    if (!bytes) return;
    if (as_kernel(bytes)) return launch_copies({{dst, src, static_cast<int64_t>(bytes)}}, static_cast<int64_t>(bytes));
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cuda::cuda_stream()));
  }
  void copy_many(std::span<const CopyRegion> regions) const override {
    const cuda::DeviceScope scope(device_);
    std::vector<cuda::kernels::CopyRegionDev> dev;
    int64_t max_bytes = 0;
    for (const auto& r : regions) {
      if (r.bytes == 0) continue;
      dev.push_back({r.dst, r.src, static_cast<int64_t>(r.bytes)});
      max_bytes = std::max(max_bytes, static_cast<int64_t>(r.bytes));
    }
    if (dev.empty()) return;
    if (dev.size() == 1) return copy(dev[0].dst, dev[0].src, static_cast<size_t>(dev[0].bytes));
    launch_copies(dev, max_bytes);
  }
  void copy_2d(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height) const override {
    const cuda::DeviceScope scope(device_);
    if (!width || !height) return;
    if (height <= 4096 && as_kernel(width * height)) {
      std::vector<cuda::kernels::CopyRegionDev> rows(height);
      for (size_t r = 0; r < height; ++r)
        rows[r] = {static_cast<char*>(dst) + r * dpitch, static_cast<const char*>(src) + r * spitch,
                   static_cast<int64_t>(width)};
      return launch_copies(rows, static_cast<int64_t>(width));
    }
    CUDA_CHECK(
        cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height, cudaMemcpyDeviceToDevice, cuda::cuda_stream()));
  }
  void zero(void* dst, size_t bytes) const override {
    const cuda::DeviceScope scope(device_);
    if (!bytes) return;
    CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, cuda::cuda_stream()));
  }

  void fill_uniform(void* dst, DType dtype, size_t n, uint64_t seed, float lo, float hi) const override {
    const cuda::DeviceScope scope(device_);
    SS_CHECK(dtype == DType::F32 || dtype == DType::BF16 || dtype == DType::F8_E4M3,
             "fill_uniform: f32, bf16 or f8_e4m3 only");
    if (dtype == DType::F8_E4M3)
      cuda::kernels::fill_uniform_e4m3(dst, static_cast<int64_t>(n), seed, lo, hi, cuda::cuda_stream());
    else
      cuda::kernels::fill_uniform(dst, dtype == DType::BF16, static_cast<int64_t>(n), seed, lo, hi,
                                  cuda::cuda_stream());
  }
  void arrange_fp8_codes(const TensorView& codes) const override {
    SS_CHECK(codes.block_scaled() && codes.device == device() && codes.ndim() == 2 && codes.strides[1] == 1,
             "arrange_fp8_codes: {} is not a kept fp8 matrix in this memory", codes.describe());
    const cuda::DeviceScope scope(device_);
    cuda::kernels::fp8_arrange_codes(static_cast<uint8_t*>(codes.data), codes.dim(0), codes.dim(1), codes.strides[0],
                                     cuda::cuda_stream());
  }
  size_t available_bytes() const override {
    const cuda::DeviceScope scope(device_);
    size_t free = 0, total = 0;
    CUDA_CHECK(cudaMemGetInfo(&free, &total));
    std::lock_guard lock(mutex_);
    for (const auto& [cls, list] : free_) free += cls * list.size();
    for (const auto& [bytes, list] : large_free_) free += bytes * list.size();
    return free;
  }

  size_t reserved() const {
    std::lock_guard lock(mutex_);
    return reserved_;
  }

 private:
  // While kernel launches are recorded (step_graphs.h), a small device copy is a copy kernel like any
  // other launch: it joins the step's segment (and graph) instead of ending it, as a copy enqueued
  // through cuda_stream() would.
  static bool as_kernel(size_t bytes) { return bytes <= kKernelCopyBytes && cuda::graphs_enabled(); }

  // One copy_many launch over `dev` (staged), recorded like any kernel.
  static void launch_copies(const std::vector<cuda::kernels::CopyRegionDev>& dev, int64_t max_bytes) {
    auto& staging = cuda::Staging::global();
    auto lock = staging.lock();
    const auto* d =
        static_cast<const cuda::kernels::CopyRegionDev*>(staging.stage(dev.data(), dev.size() * sizeof(dev[0])));
    cuda::kernels::copy_many(d, static_cast<int64_t>(dev.size()), max_bytes, cuda::launch_stream());
  }

  // cudaMalloc; when the device is full, the cached free blocks given back and one more try (an exact
  // allocation too: blocks cached in the classes would otherwise keep a large request from fitting).
  cudaError_t malloc_or_trim(void** p, size_t bytes) const {
    cudaError_t err = cudaMalloc(p, bytes);
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      trim();
      err = cudaMalloc(p, bytes);
    }
    return err;
  }

  void trim() const {
    cudaStreamSynchronize(cuda::cuda_stream());
    std::lock_guard lock(mutex_);
    for (auto& [cls, list] : free_) {
      if (cls < kCarveBelow) continue;  // pieces of chunks: below
      for (void* p : list) cudaFree(p);
      reserved_ -= cls * list.size();
      list.clear();
    }
    for (auto& [bytes, list] : large_free_) {
      for (void* p : list) cudaFree(p);
      reserved_ -= bytes * list.size();
    }
    large_free_.clear();
    for (auto it = chunks_.begin(); it != chunks_.end();) {
      const Chunk& c = it->second;
      if (c.free != c.pieces) {
        ++it;
        continue;
      }
      char* base = it->first;
      auto& list = free_[c.cls];
      list.erase(std::remove_if(
                     list.begin(), list.end(),
                     [&](void* q) { return static_cast<char*>(q) >= base && static_cast<char*>(q) < base + c.bytes; }),
                 list.end());
      cudaFree(base);
      reserved_ -= c.bytes;
      it = chunks_.erase(it);
    }
  }

  // A carved class's chunk: its class, bytes, pieces and how many of them are free.
  struct Chunk {
    size_t cls, bytes, pieces, free;
  };
  // The chunk holding piece p (the lock held).
  Chunk& chunk_of(void* p) const {
    auto it = chunks_.upper_bound(static_cast<char*>(p));
    return std::prev(it)->second;
  }

  int device_;
  mutable std::mutex mutex_;
  mutable std::map<size_t, std::vector<void*>> free_;
  mutable std::map<char*, Chunk> chunks_;                    // carved chunks by base address
  mutable std::map<size_t, std::vector<void*>> large_free_;  // released blocks of kExactFrom or more, by bytes
  mutable size_t reserved_ = 0;
  mutable std::map<size_t, std::vector<void*>> pinned_free_;  // released pinned host blocks by size class
  mutable size_t pinned_cached_ = 0;
};

// Never destroyed: cached blocks outlive static destructors that may still release into it, and the
// driver reclaims everything at exit.
CudaMemory& instance(int device) {
  static cuda::PerDevice<CudaMemory> per;
  return per.get(device, [](int d) { return new CudaMemory(d); });
}

}  // namespace

const Memory& cuda_memory() { return instance(cuda::current_device()); }
const Memory& cuda_memory(int device) { return instance(device); }

size_t cuda::memory_reserved_bytes() { return instance(cuda::current_device()).reserved(); }

}  // namespace specserve
