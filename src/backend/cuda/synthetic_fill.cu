// Memory::fill_uniform on the device: one thread per element, the formula of backend/synthetic_fill.h.
#include <cuda_runtime.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/synthetic_fill_e4m3.h"
#include "backend/synthetic_fill.h"

namespace specserve::cuda::kernels {

namespace {
__global__ void fill_uniform_kernel(void* dst, bool bf16, int64_t n, uint64_t seed, float lo, float hi) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float v = synthetic::uniform_at(seed, static_cast<uint64_t>(i), lo, hi);
    if (bf16)
      static_cast<uint16_t*>(dst)[i] = synthetic::to_bf16_bits(v);
    else
      static_cast<float*>(dst)[i] = v;
  }
}

__global__ void fill_uniform_e4m3_kernel(uint8_t* dst, int64_t n, uint64_t seed, float lo, float hi) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    dst[i] = synthetic::to_e4m3_bits(synthetic::uniform_at(seed, static_cast<uint64_t>(i), lo, hi));
}
}  // namespace

void fill_uniform(void* dst, bool bf16, int64_t n, uint64_t seed, float lo, float hi, cudaStream_t stream) {
  if (n == 0) return;
  fill_uniform_kernel<<<grid_for(n, 256, 1u << 16), 256, 0, stream>>>(dst, bf16, n, seed, lo, hi);
  CUDA_CHECK_LAUNCH();
}

void fill_uniform_e4m3(void* dst, int64_t n, uint64_t seed, float lo, float hi, cudaStream_t stream) {
  if (n == 0) return;
  fill_uniform_e4m3_kernel<<<grid_for(n, 256, 1u << 16), 256, 0, stream>>>(static_cast<uint8_t*>(dst), n, seed, lo, hi);
  CUDA_CHECK_LAUNCH();
}

}  // namespace specserve::cuda::kernels
