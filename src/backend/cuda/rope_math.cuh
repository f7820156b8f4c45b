#pragma once
// The rotate-half RoPE arithmetic shared by rope.cu and the fused head preparation (head_prep.cu): one
// definition, so both give the same bits.
#include <cuda_runtime.h>

#include <cstdint>

namespace specserve::cuda::kernels {

// The pair's angle inv_freq * position (an f32 product, as the CPU's) and its cos and sin from CUDA's
// precise sincosf (within 2 ulp of glibc's).
__device__ __forceinline__ void rope_cos_sin(float inv_freq, int32_t position, float& c, float& s) {
  const float angle = inv_freq * static_cast<float>(position);
  sincosf(angle, &s, &c);
}

// Rotates the pair (v[i], v[i + half]) of one head by the angle whose cos and sin are c and s.
__device__ __forceinline__ void rope_rotate(float* v, int i, int half, float c, float s) {
  const float a = v[i], b = v[i + half];
  v[i] = a * c + (-b) * s;
  v[i + half] = b * c + a * s;
}

// Rotates the pair (v[i], v[i + half]) of one head by inv_freq * position.
__device__ __forceinline__ void rope_pair(float* v, int i, int half, float inv_freq, int32_t position) {
  float c, s;
  rope_cos_sin(inv_freq, position, c, s);
  rope_rotate(v, i, half, c, s);
}

}  // namespace specserve::cuda::kernels
