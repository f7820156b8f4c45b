#pragma once
// The memory seam next to the op interface: where a backend's tensors live and how bytes move
// between them and the host. The model allocates its activations, workspaces, KV blocks and DeltaNet
// state through a Memory, so the same model code runs on host memory (cpu_memory()) and on device
// memory (cuda_memory(), backend/cuda/cuda_memory.h).
//
// All copies are plain byte copies (no arithmetic), so moving data through this seam never changes a
// bit. On the device, copies are enqueued on the ops' stream, in order with the ops; download()
// waits for everything enqueued before it.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>

#include "core/tensor.h"

namespace specserve {

// One copy of Memory::copy_many.
struct CopyRegion {
  void* dst = nullptr;
  const void* src = nullptr;
  size_t bytes = 0;
};

class Memory {
 public:
  virtual ~Memory() = default;
  virtual Device device() const = 0;

  // At least 64-byte aligned; contents undefined. release() takes what allocate() returned, with the
  // same size (memory may still be in use by queued device work: the device implementation only
  // reuses it for work enqueued later on the same stream).
  virtual void* allocate(size_t bytes) const = 0;
  virtual void release(void* p, size_t bytes) const noexcept = 0;

  // host -> this memory (returns once `host` may be reused).
  virtual void upload(void* dst, const void* host, size_t bytes) const = 0;
  // this memory -> host (waits for queued work first).
  virtual void download(void* host, const void* src, size_t bytes) const = 0;
  // Within this memory; the ranges must not overlap.
  virtual void copy(void* dst, const void* src, size_t bytes) const = 0;
  // `height` rows of `width` bytes, rows `dpitch` / `spitch` bytes apart, within this memory.
  virtual void copy_2d(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height) const = 0;
  // Several copies within this memory, as copy() each (no range overlaps another); a device does
  // them in one launch (e.g. a batch's per-sequence rows).
  virtual void copy_many(std::span<const CopyRegion> regions) const {
    for (const auto& r : regions) copy(r.dst, r.src, r.bytes);
  }
  virtual void zero(void* dst, size_t bytes) const = 0;

  // Host memory that holds copies of this memory's bytes set aside (a swapped-out sequence's KV blocks
  // and state, engine/swap.h): on a device page-locked (pinned), so the transfers below run at full speed
  // on the ops' stream; on the host ordinary 64-byte aligned blocks. Contents undefined; release_host()
  // takes what allocate_host() returned, with the same size.
  virtual void* allocate_host(size_t bytes) const;
  virtual void release_host(void* p, size_t bytes) const noexcept;
  // Batched byte copies between this memory and host memory from allocate_host(), in order with the
  // queued ops: download_many (each region's src in this memory, dst on the host) returns once every
  // byte is on the host; upload_many (src on the host, dst in this memory) returns once the host bytes
  // may be released or overwritten. Plain copies: the bytes come back bit for bit.
  virtual void download_many(std::span<const CopyRegion> regions) const;
  virtual void upload_many(std::span<const CopyRegion> regions) const;
  // What allocate() can still provide, for start-up sizing: on a device its free memory plus the
  // allocator's cached blocks; on the host the physical RAM (policy decides what share to use).
  virtual size_t available_bytes() const = 0;
  // n elements of `dtype` (F32, BF16 or F8_E4M3) at dst set to the seeded uniform values of
  // backend/synthetic_fill.h in [lo, hi): synthetic weights made where they live (no host copy).
  virtual void fill_uniform(void* dst, DType dtype, size_t n, uint64_t seed, float lo, float hi) const = 0;
  // A kept fp8 matrix (block_scaled, in this memory, its codes in natural order) put into the order this memory's
  // matmuls read, in place: nothing on the host; on a CUDA device fragment order (backend/cuda/fp8_code_order.h).
  // Called once per matrix, where its codes arrive (upload_tensors, the synthetic weights).
  virtual void arrange_fp8_codes(const TensorView& codes) const { (void)codes; }

  // Makes this memory's device the calling thread's current one, for work that runs on it (a tensor-parallel
  // rank's ops: MemoryDeviceScope), and returns what leave_device needs to restore the previous one (-1:
  // nothing changed, as on the host).
  virtual int enter_device() const { return -1; }
  // The device this memory is on (the CUDA ordinal), or -1 for the host.
  virtual int device_index() const { return -1; }
  virtual void leave_device(int previous) const noexcept { (void)previous; }
};

// A scope in which `mem`'s device is current (Memory::enter_device).
class MemoryDeviceScope {
 public:
  explicit MemoryDeviceScope(const Memory& mem) : mem_(mem), previous_(mem.enter_device()) {}
  ~MemoryDeviceScope() { mem_.leave_device(previous_); }
  MemoryDeviceScope(const MemoryDeviceScope&) = delete;
  MemoryDeviceScope& operator=(const MemoryDeviceScope&) = delete;

 private:
  const Memory& mem_;
  int previous_;
};

// Host memory (64-byte aligned heap blocks, memcpy / memset).
const Memory& cpu_memory();
// Host memory with an identity of its own for each `rank` (rank 0: cpu_memory()): the CPU simulation of tensor
// parallelism places each rank in its own, as it places each on its own GPU (docs/DESIGN.md §6.3), so that a
// rank's buffers are told apart from another's. The same blocks and copies as cpu_memory(). rank < 64.
const Memory& cpu_rank_memory(int rank);

// An owning, move-only block of a Memory.
class Buffer {
 public:
  Buffer() = default;
  Buffer(const Memory& mem, size_t bytes) : mem_(&mem), bytes_(bytes) {
    if (bytes) data_ = mem.allocate(bytes);
  }
  ~Buffer() { reset(); }
  Buffer(Buffer&& o) noexcept
      : mem_(o.mem_), data_(std::exchange(o.data_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      reset();
      mem_ = o.mem_;
      data_ = std::exchange(o.data_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void reset() noexcept {
    if (data_) mem_->release(data_, bytes_);
    data_ = nullptr;
    bytes_ = 0;
  }
  // Makes room for `bytes` (contents undefined afterwards when it grows).
  void reserve(const Memory& mem, size_t bytes) {
    if (bytes <= bytes_ && mem_ == &mem) return;
    *this = Buffer(mem, bytes);
  }
  void* data() const { return data_; }
  float* f32() const { return static_cast<float*>(data_); }
  size_t bytes() const { return bytes_; }
  const Memory* memory() const { return mem_; }
  TensorView view(DType dtype, const Shape& shape) const {
    return TensorView::contiguous(data_, dtype, shape, mem_ ? mem_->device() : Device::CPU);
  }

 private:
  const Memory* mem_ = nullptr;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// An owning contiguous tensor in a Memory (host or device): the backend-neutral counterpart of Tensor.
class MemTensor {
 public:
  MemTensor() = default;
  static MemTensor empty(const Memory& mem, DType dtype, const Shape& shape) {
    MemTensor t;
    t.buffer_ = Buffer(mem, static_cast<size_t>(shape.numel()) * dtype_size(dtype));
    t.view_ = t.buffer_.view(dtype, shape);
    return t;
  }
  static MemTensor zeros(const Memory& mem, DType dtype, const Shape& shape) {
    MemTensor t = empty(mem, dtype, shape);
    if (t.nbytes()) mem.zero(t.view_.data, t.nbytes());
    return t;
  }
  const TensorView& view() const { return view_; }
  operator const TensorView&() const { return view_; }
  template <typename T>
  T* as() const {
    return view_.as<T>();
  }
  const Shape& shape() const { return view_.shape; }
  size_t nbytes() const { return view_.nbytes(); }

 private:
  Buffer buffer_;
  TensorView view_;
};

// GiB, for messages about memory sizes.
inline double gib(size_t bytes) { return static_cast<double>(bytes) / double(size_t{1} << 30); }

// On a device memory: throws a one-line Error naming both sizes when `bytes` exceed what the memory
// can still provide ("{what} needs X GiB of device memory but only Y GiB are free{hint}"). Host
// memory is not checked (the policy there is the caller's).
void require_room(const Memory& mem, size_t bytes, const std::string& what, const std::string& hint = "");

// Copies the tensors `views` point at into one block of `mem` (a tensor shared by several views,
// e.g. a tied head, once; null views and views already in mem's device memory skipped; a block-scaled
// fp8 matrix's scales with it) and points the views there. Byte copies: the copies
// hold the host's exact bits. The views must be contiguous host tensors. Throws a one-line Error
// naming both sizes when the tensors do not fit in the memory's available bytes.
Buffer upload_tensors(std::span<TensorView* const> views, const Memory& mem);

}  // namespace specserve
