// The norms as one block a row (norm_reference.h): thread t of a block of norm_threads(d) accumulates
// elements t, t + blockDim, ... of its row with fmaf, then warp_sum, then the warps' partials in warp order;
// rows up to kNormHeld * blockDim.x wide are held in registers between the sum and the normalisation, and
// the bf16 copy (XbOut) is read back from the written output after a barrier. The bits every norm gives.
#include <cuda_runtime.h>

#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/norm_math.cuh"
#include "backend/cuda/norm_reference.h"
#include "backend/cuda/xb_out.cuh"

namespace specserve::cuda::kernels {

namespace {

// With xb.regs: group g's row of the bf16 copy once its outputs are written, and padding rows
// groups + g, 2 groups + g, ...
__device__ __forceinline__ void write_xb_row(const XbOut& xb, int64_t g, int64_t groups, const float* row, int64_t d) {
  if (xb.regs == nullptr) return;
  __syncthreads();  // the row's outputs, written by the block's threads
  xb_write(xb, g, row, d, 0, xb.pitch, threadIdx.x, blockDim.x);
  for (int64_t m = groups + g; m < xb.rows; m += groups)
    xb_write(xb, m, nullptr, d, 0, xb.pitch, threadIdx.x, blockDim.x);
}

// Rows up to kNormHeld * blockDim.x wide are held in registers (norm_math.cuh: the same bits), and
// their norm weights are loaded before the wait for the previous kernel: a one-row decode norm then
// waits for nothing in DRAM after the matmul before it ends (launch.cuh allows weights early).
__global__ void rms_norm_kernel(const float* x, const float* w, float* y, int64_t groups, int64_t d, int kind,
                                float eps, XbOut xb) {
  __shared__ float shared[32];
  const bool held = norm_held(d);
  float wv[kNormHeld];
  if (held) load_held(w, d, wv);
  pdl_begin();
  for (int64_t g = blockIdx.x; g < groups; g += gridDim.x) {
    if (held) {
      float v[kNormHeld];
      load_held(x + g * d, d, v);
      write_normed_held(v, wv, y + g * d, d, kind, inv_rms_of(held_sum_sq(v, d), d, eps, shared));
    } else {
      write_normed(x + g * d, w, y + g * d, d, kind, inv_rms(x + g * d, d, eps, shared));
    }
    write_xb_row(xb, g, groups, y + g * d, d);
  }
}

// x += y (the add kernel's x[i] + y[i]), then y_out = rms_norm(x) exactly as rms_norm_kernel: the
// thread that adds an element is the one that squares it, in the same order.
__global__ void add_rms_norm_kernel(float* x, const float* y, const float* w, float* out, int64_t groups, int64_t d,
                                    int kind, float eps, XbOut xb) {
  __shared__ float shared[32];
  const bool held = norm_held(d);
  float wv[kNormHeld];
  if (held) load_held(w, d, wv);
  pdl_begin();
  for (int64_t g = blockIdx.x; g < groups; g += gridDim.x) {
    float* xr = x + g * d;
    const float* yr = y + g * d;
    float* orow = out + g * d;
    if (held) {
      float v[kNormHeld], u[kNormHeld];
      load_held(xr, d, v);
      load_held(yr, d, u);
#pragma unroll
      for (int j = 0; j < kNormHeld; ++j) {
        const int64_t i = threadIdx.x + int64_t{j} * blockDim.x;
        v[j] = v[j] + u[j];
        if (i < d) xr[i] = v[j];
      }
      write_normed_held(v, wv, orow, d, kind, inv_rms_of(held_sum_sq(v, d), d, eps, shared));
    } else {
      float s = 0.0f;
      for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
        const float v = xr[i] + yr[i];
        xr[i] = v;
        s = fmaf(v, v, s);
      }
      write_normed(xr, w, orow, d, kind, inv_rms_of(s, d, eps, shared));
    }
    write_xb_row(xb, g, groups, orow, d);
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

void rms_norm_reference(const float* x, const float* w, float* y, int64_t groups, int64_t d, int kind, float eps,
                        cudaStream_t stream, const XbOut& xb) {
  if (groups == 0) return;
  launch_pdl(rms_norm_kernel, static_cast<unsigned>(std::min<int64_t>(groups, 65535)), norm_threads(d), 0, stream, x, w,
             y, groups, d, kind, eps, xb);
  CUDA_CHECK_LAUNCH();
}

void add_rms_norm_reference(float* x, const float* y, const float* w, float* out, int64_t groups, int64_t d, int kind,
                            float eps, cudaStream_t stream, const XbOut& xb) {
  if (groups == 0) return;
  launch_pdl(add_rms_norm_kernel, static_cast<unsigned>(std::min<int64_t>(groups, 65535)), norm_threads(d), 0, stream,
             x, y, w, out, groups, d, kind, eps, xb);
  CUDA_CHECK_LAUNCH();
}

void rms_norm_gated_reference(const float* x, const float* z, const float* w, float* y, int64_t groups, int64_t d,
                              float eps, cudaStream_t stream) {
  if (groups == 0) return;
  launch_pdl(rms_norm_gated_kernel, static_cast<unsigned>(std::min<int64_t>(groups, 65535)), norm_threads(d), 0, stream,
             x, z, w, y, groups, d, eps);
  CUDA_CHECK_LAUNCH();
}

}  // namespace specserve::cuda::kernels
