#pragma once
// The rotate-half RoPE arithmetic shared by rope.cu and the fused head preparation (head_prep.cu): one
// definition, so both give the same bits.
#include <cuda_runtime.h>

#include <cstdint>

namespace specserve::cuda::kernels {

// Rotates the pair (v[i], v[i + half]) of one head by inv_freq * position (an f32 product, as the
// CPU's; cos/sin from CUDA's precise sincosf, within 2 ulp of glibc's).
__device__ __forceinline__ void rope_pair(float* v, int i, int half, float inv_freq, int32_t position) {
  const float angle = inv_freq * static_cast<float>(position);
  float s, c;
  sincosf(angle, &s, &c);
  const float a = v[i], b = v[i + half];
  v[i] = a * c + (-b) * s;
  v[i + half] = b * c + a * s;
}

}  // namespace specserve::cuda::kernels
