// Memory::copy_many on the device: one launch for many small device-to-device copies (a batch's
// per-sequence rows), instead of one cudaMemcpyAsync each. blockIdx.y is the region; the blocks of a
// region copy its 4-byte words (or bytes, when a region is not word-aligned) in a grid-stride loop.
#include <cuda_runtime.h>

#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"

namespace specserve::cuda::kernels {

namespace {

// It never lets the next launch start before its copies are done (no pdl_launch_dependents: the
// trigger is its completion), since a copy may write weights, which the gemv kernel reads before its
// pdl_wait (launch.cuh).
__global__ void copy_many_kernel(const CopyRegionDev* regions) {
  pdl_wait();
  const CopyRegionDev r = regions[blockIdx.y];
  const bool words = ((reinterpret_cast<uintptr_t>(r.dst) | reinterpret_cast<uintptr_t>(r.src) | r.bytes) & 3u) == 0;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  if (words) {
    auto* d = static_cast<uint32_t*>(r.dst);
    const auto* s = static_cast<const uint32_t*>(r.src);
    for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < r.bytes / 4; i += stride) d[i] = s[i];
  } else {
    auto* d = static_cast<unsigned char*>(r.dst);
    const auto* s = static_cast<const unsigned char*>(r.src);
    for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < r.bytes; i += stride) d[i] = s[i];
  }
}

}  // namespace

void copy_many(const CopyRegionDev* regions, int64_t count, int64_t max_bytes, cudaStream_t stream) {
  if (count == 0 || max_bytes == 0) return;
  constexpr int kThreads = 256;
  const int64_t blocks = std::clamp<int64_t>((max_bytes / 4 + kThreads - 1) / kThreads, 1, 64);
  for (int64_t first = 0; first < count; first += 65535) {
    const auto n = static_cast<unsigned>(std::min<int64_t>(65535, count - first));
    launch_pdl(copy_many_kernel, dim3(static_cast<unsigned>(blocks), n), kThreads, 0, stream, regions + first);
    CUDA_CHECK_LAUNCH();
  }
}

}  // namespace specserve::cuda::kernels
