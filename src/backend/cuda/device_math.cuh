#pragma once
// Device helpers shared by the kernels. The library is built with --fmad=false (CMakeLists.txt):
// like the CPU backend's -ffp-contract=off, a written a * b + c rounds twice everywhere, and fused
// multiply-adds appear only where a kernel calls fmaf() on purpose. So one element's arithmetic is
// the same in every code path that computes it (row invariance in the last bit).
#include <cuda_runtime.h>

#include <cstdint>

namespace specserve::cuda {

__device__ __forceinline__ float bf16_lo(uint32_t pair) { return __uint_as_float(pair << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t pair) { return __uint_as_float(pair & 0xffff0000u); }
__device__ __forceinline__ float bf16_to_f32(uint16_t v) { return __uint_as_float(uint32_t{v} << 16); }

// Butterfly sum over the 32 lanes (xor 16, 8, 4, 2, 1): a fixed tree; every lane ends with the same
// bits (each step adds the same two values, in either operand order).
__device__ __forceinline__ float warp_sum(float v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

// The CPU backend's formulas (backend/cpu/elementwise.cpp), with CUDA's expf/log1pf (within a
// couple of ulp of glibc's).
__device__ __forceinline__ float d_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ float d_silu(float x) { return x / (1.0f + expf(-x)); }
__device__ __forceinline__ float d_softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

// Grid size for a grid-stride loop over n items with `threads` per block.
inline unsigned grid_for(int64_t n, int threads, unsigned cap = 65535u) {
  int64_t b = (n + threads - 1) / threads;
  if (b < 1) b = 1;
  return static_cast<unsigned>(b < cap ? b : cap);
}

}  // namespace specserve::cuda
