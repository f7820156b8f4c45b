#include "backend/cuda/device_buffer.h"

#include <cuda_runtime.h>

#include <cstring>
#include <utility>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_stream.h"

namespace specserve::cuda {

namespace {
__global__ void fill_words(uint32_t* p, size_t n, uint32_t value) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x)
    p[i] = value;
}
}  // namespace

DeviceBuffer::DeviceBuffer(size_t bytes) { reset(bytes); }

DeviceBuffer::~DeviceBuffer() { release(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    release();
    data_ = std::exchange(o.data_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::release() {
  if (data_ != nullptr) {
    // Kernels still queued may read this memory: let the stream drain first. Errors are ignored
    // here (destructors must not throw); a device fault surfaces at the next checked call.
    cudaStreamSynchronize(cuda_stream());
    cudaFree(data_);
    data_ = nullptr;
    bytes_ = 0;
  }
}

void DeviceBuffer::reset(size_t bytes) {
  release();
  if (bytes == 0) return;
  CUDA_CHECK(cudaMalloc(&data_, bytes));
  bytes_ = bytes;
}

void DeviceBuffer::upload(const void* host, size_t bytes, size_t offset) {
  if (bytes == 0) return;
  if (offset + bytes > bytes_)
    cuda_fail(cudaErrorInvalidValue, "DeviceBuffer::upload out of range", __FILE__, __LINE__);
  CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(data_) + offset, host, bytes, cudaMemcpyHostToDevice, cuda_stream()));
  // The source may be pageable and reused by the caller right away.
  CUDA_CHECK(cudaStreamSynchronize(cuda_stream()));
}

void DeviceBuffer::download(void* host, size_t bytes, size_t offset) const {
  if (bytes == 0) return;
  if (offset + bytes > bytes_)
    cuda_fail(cudaErrorInvalidValue, "DeviceBuffer::download out of range", __FILE__, __LINE__);
  CUDA_CHECK(
      cudaMemcpyAsync(host, static_cast<const char*>(data_) + offset, bytes, cudaMemcpyDeviceToHost, cuda_stream()));
  CUDA_CHECK(cudaStreamSynchronize(cuda_stream()));
}

void DeviceBuffer::fill_f32(float value) {
  const size_t n = bytes_ / 4;
  if (n == 0) return;
  uint32_t bits;
  static_assert(sizeof(bits) == sizeof(value));
  memcpy(&bits, &value, 4);
  const unsigned blocks = static_cast<unsigned>(n / 256 + 1 < 4096 ? n / 256 + 1 : 4096);
  fill_words<<<blocks, 256, 0, cuda_stream()>>>(static_cast<uint32_t*>(data_), n, bits);
  CUDA_CHECK_LAUNCH();
}

void DeviceBuffer::fill_bytes(uint8_t value) {
  if (bytes_ == 0) return;
  CUDA_CHECK(cudaMemsetAsync(data_, value, bytes_, cuda_stream()));
}

}  // namespace specserve::cuda
