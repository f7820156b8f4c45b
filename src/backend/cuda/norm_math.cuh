#pragma once
// The RMSNorm arithmetic shared by norm.cu and the fused kernels that norm a group on the way
// (head_prep.cu): one definition, so a fused launch gives the bits of rms_norm(). A group of d elements
// is normed by one block of norm_threads(d) threads: thread t accumulates elements t, t + blockDim, ...
// with fmaf, then warp_sum, then the warps' partials in warp order.
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/device_math.cuh"

namespace specserve::cuda::kernels {

// Block-wide sum with a fixed order; every thread gets the result. blockDim.x a multiple of 32, <= 1024.
__device__ __forceinline__ float block_sum(float v, float* shared) {
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
__device__ __forceinline__ float inv_rms_of(float partial, int64_t d, float eps, float* shared) {
  const float mean = block_sum(partial, shared) / static_cast<float>(d);
  return 1.0f / sqrtf(mean + eps);
}

__device__ __forceinline__ float inv_rms(const float* x, int64_t d, float eps, float* shared) {
  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) s = fmaf(x[i], x[i], s);
  return inv_rms_of(s, d, eps, shared);
}

// One normed element given r = 1 / rms (kind 0: Plain, 1: ZeroCentred).
__device__ __forceinline__ float normed(float x, float w, int kind, float r) {
  return kind == 0 ? w * (x * r) : (x * r) * (1.0f + w);
}

// y = the norm of x given r = 1 / rms.
__device__ __forceinline__ void write_normed(const float* x, const float* w, float* y, int64_t d, int kind, float r) {
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) y[i] = normed(x[i], w[i], kind, r);
}

// A group of d <= kNormHeld * blockDim.x elements can be held in registers: slot j of thread t is
// element t + j * blockDim.x, the order in which inv_rms and write_normed walk it, so the held
// functions below give their bits. They spare the second read of x, and let a kernel load its norm
// weights before waiting for the previous kernel (launch.cuh).
inline constexpr int kNormHeld = 8;
__device__ __forceinline__ bool norm_held(int64_t d) { return d <= int64_t{kNormHeld} * blockDim.x; }
__device__ __forceinline__ void load_held(const float* p, int64_t d, float (&r)[kNormHeld]) {
#pragma unroll
  for (int j = 0; j < kNormHeld; ++j) {
    const int64_t i = threadIdx.x + int64_t{j} * blockDim.x;
    r[j] = i < d ? p[i] : 0.0f;
  }
}
// This thread's partial sum of squares, as inv_rms accumulates it.
__device__ __forceinline__ float held_sum_sq(const float (&v)[kNormHeld], int64_t d) {
  float s = 0.0f;
#pragma unroll
  for (int j = 0; j < kNormHeld; ++j)
    if (threadIdx.x + int64_t{j} * blockDim.x < d) s = fmaf(v[j], v[j], s);
  return s;
}
// write_normed from held x and w.
__device__ __forceinline__ void write_normed_held(const float (&v)[kNormHeld], const float (&w)[kNormHeld], float* y,
                                                  int64_t d, int kind, float r) {
#pragma unroll
  for (int j = 0; j < kNormHeld; ++j) {
    const int64_t i = threadIdx.x + int64_t{j} * blockDim.x;
    if (i < d) y[i] = normed(v[j], w[j], kind, r);
  }
}

// Threads per block: a function of d only (never of the number of groups).
// (A one-row norm of a 4096-wide hidden state is one block: 1024 threads keep its loads few per thread.)
inline int norm_threads(int64_t d) {
  return d <= 64 ? 32 : d <= 128 ? 64 : d <= 512 ? 128 : d <= 1024 ? 256 : d <= 2048 ? 512 : 1024;
}

}  // namespace specserve::cuda::kernels
