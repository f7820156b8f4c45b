#pragma once
// Per-op host -> device staging of small metadata (token ids, positions, block tables, span lists)
// that the op interface passes as host arrays. An op packs what its kernel needs into one host
// byte array, stage() copies it to device scratch on cuda_stream() and returns the device address;
// the kernel enqueued next on the same stream reads it.
//
// The scratch is a ring (pinned host memory mirrored by device memory) cut into segments: each
// stage() takes the next bytes of the current segment, so the host can run many ops ahead of the
// GPU (a forward's hundreds of small ops queue without waiting). Leaving a segment records an event;
// the host waits on it only when it comes back to that segment a whole ring later, before
// overwriting host bytes the DMA may not have read yet. Device bytes need no guard: the next copy
// into them is stream-ordered after every kernel enqueued before it. A stage larger than a segment
// takes a separate buffer after draining the stream (rare: huge block tables).
//
// A stage whose bytes equal one of the last few stages still in the ring (its segment not re-entered
// since) returns that device copy instead of copying again: a forward's layers stage the same
// positions and block tables, so one step copies each once.
// Thread-safe (one mutex); the returned pointer is valid for the kernel enqueued next.
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
  std::vector<Slot*> segments_;
  struct Recent {
    size_t offset;  // in the ring
    size_t bytes;
    uint64_t generation;  // of its segment when staged
  };
  static constexpr size_t kRecentStages = 16;
  std::vector<Recent> recent_;
  size_t recent_next_ = 0;
  std::vector<uint64_t> generation_;  // per segment: times the ring entered it
  size_t segment_ = 0;                // current segment
  size_t head_ = 0;                   // next free byte offset within the ring
  char* host_ring_ = nullptr;
  char* device_ring_ = nullptr;
  void* big_host_ = nullptr;  // for stages larger than a segment
  void* big_device_ = nullptr;
  size_t big_bytes_ = 0;
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
