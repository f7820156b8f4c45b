// Rotate-half RoPE (backend/cpu/rope.cpp). inv_freq comes precomputed by the host with the CPU's exact
// f32 recipe, so the angle inv_freq[i] * position is the same f32 on both backends; cos/sin are
// CUDA's precise sincosf (within 2 ulp of glibc's). One thread per (row, head, rotated pair).
#include <cuda_runtime.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/rope_math.cuh"
#include "backend/cuda/launch.cuh"

namespace specserve::cuda::kernels {

namespace {
__global__ void rope_kernel(float* x, int64_t rows, int64_t ld, int heads, int head_dim, int half,
                            const float* inv_freq, const int32_t* positions) {
  pdl_begin();
  const int64_t total = rows * heads * half;
  for (int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; t < total; t += int64_t{gridDim.x} * blockDim.x) {
    const int i = static_cast<int>(t % half);
    const int64_t rh = t / half;
    const int h = static_cast<int>(rh % heads);
    const int64_t r = rh / heads;
    rope_pair(x + r * ld + int64_t{h} * head_dim, i, half, inv_freq[i], positions[r]);
  }
}
}  // namespace

void rope(float* x, int64_t rows, int64_t ld, int heads, int head_dim, int rot_dim, const float* inv_freq,
          const int32_t* positions, cudaStream_t stream) {
  const int64_t total = rows * heads * (rot_dim / 2);
  if (total == 0) return;
  launch_pdl(rope_kernel, grid_for(total, 256), 256, 0, stream, x, rows, ld, heads, head_dim, rot_dim / 2, inv_freq,
             positions);
  CUDA_CHECK_LAUNCH();
}

}  // namespace specserve::cuda::kernels
