// RMSNorm flavours (backend/cpu/norm.cpp). One block per group of d elements. The sum of squares has a
// fixed order that depends only on d: thread t of the block (blockDim fixed by d alone) accumulates
// elements t, t + blockDim, ... with fmaf, then warp_sum, then the warps' partials in warp order.
#include <cuda_runtime.h>

#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/norm_math.cuh"
#include "backend/cuda/launch.cuh"

namespace specserve::cuda::kernels {

namespace {

__global__ void rms_norm_kernel(const float* x, const float* w, float* y, int64_t groups, int64_t d, int kind,
                                float eps) {
  pdl_begin();
  __shared__ float shared[32];
  for (int64_t g = blockIdx.x; g < groups; g += gridDim.x)
    write_normed(x + g * d, w, y + g * d, d, kind, inv_rms(x + g * d, d, eps, shared));
}

// x += y (the add kernel's x[i] + y[i]), then y_out = rms_norm(x) exactly as rms_norm_kernel: the
// thread that adds an element is the one that squares it, in the same order.
__global__ void add_rms_norm_kernel(float* x, const float* y, const float* w, float* out, int64_t groups, int64_t d,
                                    int kind, float eps) {
  pdl_begin();
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
  pdl_begin();
  __shared__ float shared[32];
  for (int64_t g = blockIdx.x; g < groups; g += gridDim.x) {
    const float* xr = x + g * d;
    const float* zr = z + g * d;
    float* yr = y + g * d;
    const float r = inv_rms(xr, d, eps, shared);
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) yr[i] = (w[i] * (xr[i] * r)) * d_silu(zr[i]);
  }
}

}  // namespace

void rms_norm(const float* x, const float* w, float* y, int64_t groups, int64_t d, int kind, float eps,
              cudaStream_t stream) {
  if (groups == 0) return;
  launch_pdl(rms_norm_kernel, static_cast<unsigned>(std::min<int64_t>(groups, 65535)), norm_threads(d), 0, stream, x, w,
             y, groups, d, kind, eps);
  CUDA_CHECK_LAUNCH();
}

void add_rms_norm(float* x, const float* y, const float* w, float* out, int64_t groups, int64_t d, int kind, float eps,
                  cudaStream_t stream) {
  if (groups == 0) return;
  launch_pdl(add_rms_norm_kernel, static_cast<unsigned>(std::min<int64_t>(groups, 65535)), norm_threads(d), 0, stream,
             x, y, w, out, groups, d, kind, eps);
  CUDA_CHECK_LAUNCH();
}

void rms_norm_gated(const float* x, const float* z, const float* w, float* y, int64_t groups, int64_t d, float eps,
                    cudaStream_t stream) {
  if (groups == 0) return;
  launch_pdl(rms_norm_gated_kernel, static_cast<unsigned>(std::min<int64_t>(groups, 65535)), norm_threads(d), 0, stream,
             x, z, w, y, groups, d, eps);
  CUDA_CHECK_LAUNCH();
}

}  // namespace specserve::cuda::kernels
