#pragma once
// DeviceBuffer: an owning, move-only block of device memory (cudaMalloc; never managed memory).
// upload/download go through cuda_stream() and are synchronous with respect to the host (download
// waits for the stream, so it also waits for every op enqueued before it).
#include <cstddef>
#include <cstdint>
#include <vector>

namespace specserve::cuda {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  size_t bytes() const { return bytes_; }

  // Frees the current memory (after the stream drains) and allocates `bytes` (contents undefined).
  void reset(size_t bytes);
  // Host -> device, `bytes` at byte `offset` of this buffer.
  void upload(const void* host, size_t bytes, size_t offset = 0);
  // Device -> host, waits for the stream first.
  void download(void* host, size_t bytes, size_t offset = 0) const;
  // Every 32-bit word set to `value` (enqueued; e.g. NaN to poison outputs). bytes() % 4 == 0.
  void fill_f32(float value);
  // Every byte set to `value` (enqueued).
  void fill_bytes(uint8_t value);

  template <typename T>
  static DeviceBuffer from(const std::vector<T>& v) {
    DeviceBuffer b(v.size() * sizeof(T));
    b.upload(v.data(), v.size() * sizeof(T));
    return b;
  }
  template <typename T>
  std::vector<T> to_vector(size_t n) const {
    std::vector<T> v(n);
    download(v.data(), n * sizeof(T));
    return v;
  }

 private:
  void release();
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace specserve::cuda
