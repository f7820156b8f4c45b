// RMSNorm flavours (backend/cpu/norm.cpp). One block per group of d elements. The sum of squares has a
// fixed order that depends only on d: thread t of the block (blockDim fixed by d alone) accumulates
// elements t, t + blockDim, ... with fmaf, then warp_sum, then the warps' partials in warp order.
#include <cuda_runtime.h>

#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/kernels.h"

namespace specserve::cuda::kernels {

namespace {

// Block-wide sum with a fixed order; every thread gets the result. blockDim.x a multiple of 32, <= 1024.
__device__ float block_sum(float v, float* shared) {
  v = warp_sum(v);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, warps = blockDim.x >> 5;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  float total = 0.0f;
  for (int i = 0; i < warps; ++i) total += shared[i];
  __syncthreads();  // shared[] may be reused by the caller
  return total;
}

// 1 / rms from this thread's partial sum of squares (the block's partials summed in fixed order).
__device__ float inv_rms_of(float partial, int64_t d, float eps, float* shared) {
  const float mean = block_sum(partial, shared) / static_cast<float>(d);
  return 1.0f / sqrtf(mean + eps);
}

__device__ float inv_rms(const float* x, int64_t d, float eps, float* shared) {
  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) s = fmaf(x[i], x[i], s);
  return inv_rms_of(s, d, eps, shared);
}

// y = the norm of x given r = 1 / rms (kind 0: Plain, 1: ZeroCentred).
__device__ void write_normed(const float* x, const float* w, float* y, int64_t d, int kind, float r) {
  if (kind == 0) {
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) y[i] = w[i] * (x[i] * r);
  } else {
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) y[i] = (x[i] * r) * (1.0f + w[i]);
  }
}

__global__ void rms_norm_kernel(const float* x, const float* w, float* y, int64_t groups, int64_t d, int kind,
                                float eps) {
  __shared__ float shared[32];
  for (int64_t g = blockIdx.x; g < groups; g += gridDim.x)
    write_normed(x + g * d, w, y + g * d, d, kind, inv_rms(x + g * d, d, eps, shared));
}

// x += y (the add kernel's x[i] + y[i]), then y_out = rms_norm(x) exactly as rms_norm_kernel: the
// thread that adds an element is the one that squares it, in the same order.
__global__ void add_rms_norm_kernel(float* x, const float* y, const float* w, float* out, int64_t groups, int64_t d,
                                    int kind, float eps) {
  __shared__ float shared[32];
  for (int64_t g = blockIdx.x; g < groups; g += gridDim.x) {
    float* xr = x + g * d;
    const float* yr = y + g * d;
    float* orow = out + g * d;
    float s = 0.0f;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
      const float v = xr[i] + yr[i];
      xr[i] = v;
      s = fmaf(v, v, s);
    }
    write_normed(xr, w, orow, d, kind, inv_rms_of(s, d, eps, shared));
  }
}

__global__ void rms_norm_gated_kernel(const float* x, const float* z, const float* w, float* y, int64_t groups,
                                      int64_t d, float eps) {
  __shared__ float shared[32];
  for (int64_t g = blockIdx.x; g < groups; g += gridDim.x) {
    const float* xr = x + g * d;
    const float* zr = z + g * d;
    float* yr = y + g * d;
    const float r = inv_rms(xr, d, eps, shared);
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) yr[i] = (w[i] * (xr[i] * r)) * d_silu(zr[i]);
  }
}

// Threads per block: a function of d only (never of the number of groups).
// (A one-row norm of a 4096-wide hidden state is one block: 1024 threads keep its loads few per thread.)
int threads_for(int64_t d) {
  return d <= 64 ? 32 : d <= 128 ? 64 : d <= 512 ? 128 : d <= 1024 ? 256 : d <= 2048 ? 512 : 1024;
}

}  // namespace

void rms_norm(const float* x, const float* w, float* y, int64_t groups, int64_t d, int kind, float eps,
              cudaStream_t stream) {
  if (groups == 0) return;
  rms_norm_kernel<<<static_cast<unsigned>(std::min<int64_t>(groups, 65535)), threads_for(d), 0, stream>>>(
      x, w, y, groups, d, kind, eps);
  CUDA_CHECK_LAUNCH();
}

void add_rms_norm(float* x, const float* y, const float* w, float* out, int64_t groups, int64_t d, int kind, float eps,
                  cudaStream_t stream) {
  if (groups == 0) return;
  add_rms_norm_kernel<<<static_cast<unsigned>(std::min<int64_t>(groups, 65535)), threads_for(d), 0, stream>>>(
      x, y, w, out, groups, d, kind, eps);
  CUDA_CHECK_LAUNCH();
}

void rms_norm_gated(const float* x, const float* z, const float* w, float* y, int64_t groups, int64_t d, float eps,
                    cudaStream_t stream) {
  if (groups == 0) return;
  rms_norm_gated_kernel<<<static_cast<unsigned>(std::min<int64_t>(groups, 65535)), threads_for(d), 0, stream>>>(
      x, z, w, y, groups, d, eps);
  CUDA_CHECK_LAUNCH();
}

}  // namespace specserve::cuda::kernels
