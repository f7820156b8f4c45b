#pragma once
// Per-op host -> device staging of small metadata (token ids, positions, block tables, span lists)
// that the op interface passes as host arrays. An op packs what its kernel needs into one host
// byte array, stage() copies it to a device scratch buffer on cuda_stream() and returns the device
// address. The kernel enqueued next on the same stream reads it; the next stage() call overwrites
// the scratch only after that kernel (stream order).
//
// Host side: a small ring of pinned buffers, each guarded by an event recorded after its copy, so
// the host never overwrites bytes the DMA has not read yet, yet may run a few ops ahead of the GPU.
// Thread-safe (one mutex); the returned pointer is valid until the next stage() call.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace specserve::cuda {

class Staging {
 public:
  static Staging& global();
  // Copies `bytes` bytes of `host` to device scratch (16-byte aligned) and returns the device
  // address. The caller must enqueue its kernel before anyone else calls stage(): hold lock().
  void* stage(const void* host, size_t bytes);

  class Lock;
  Lock lock();

  ~Staging();

 private:
  Staging();
  struct Slot;
  std::vector<Slot*> slots_;
  size_t next_ = 0;
  void* device_ = nullptr;
  size_t device_bytes_ = 0;
  void* mutex_;
};

// RAII lock over the staging buffer: hold it from stage() until the kernel that reads the staged
// bytes has been launched.
class Staging::Lock {
 public:
  explicit Lock(void* mutex);
  ~Lock();
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;

 private:
  void* mutex_;
};

// Helper to pack heterogeneous POD arrays into one staging blob with aligned offsets.
class StagingBlob {
 public:
  // Appends n elements of T (aligned to 16 bytes) and returns their byte offset in the blob.
  template <typename T>
  size_t append(const T* p, size_t n) {
    size_t off = (bytes_.size() + 15) / 16 * 16;
    bytes_.resize(off + n * sizeof(T));
    if (n) __builtin_memcpy(bytes_.data() + off, p, n * sizeof(T));
    return off;
  }
  const uint8_t* data() const { return bytes_.data(); }
  size_t size() const { return bytes_.size(); }

 private:
  std::vector<uint8_t> bytes_;
};

}  // namespace specserve::cuda
