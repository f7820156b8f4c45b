// Elementwise ops and the embedding gather (backend/cpu/elementwise.cpp): one thread per element,
// the CPU's formulas (no contraction: --fmad=false), grid-stride loops.
#include <cuda_runtime.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/xb_out.cuh"

namespace specserve::cuda::kernels {

namespace {
constexpr int kThreads = 256;

#define SS_GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (n); i += int64_t{gridDim.x} * blockDim.x)

__global__ void swiglu_kernel(const float* g, const float* u, float* o, int64_t n) {
  pdl_begin();
  SS_GRID_STRIDE(i, n) o[i] = d_silu(g[i]) * u[i];
}
// swiglu over [M, I] with its XbOut: one thread per register of the copy (xb_out.cuh), which computes the
// register's two outputs (swiglu_kernel's formula), stores them, and packs them; +0 outside [M, I].
__global__ void swiglu_xb_kernel(const float* g, const float* u, float* o, int64_t M, int64_t I, XbOut xb) {
  pdl_begin();
  const int64_t half = xb.pitch / 2;
  SS_GRID_STRIDE(i, xb.rows * half) {
    const int64_t m = i / half, k = 2 * (i % half);
    float lo = 0.0f, hi = 0.0f;
    if (m < M && k < I) {
      const int64_t e = m * I + k;
      lo = d_silu(g[e]) * u[e];
      o[e] = lo;
      if (k + 1 < I) {
        hi = d_silu(g[e + 1]) * u[e + 1];
        o[e + 1] = hi;
      }
    }
    xb.regs[i] = tc::pack_bf16x2(lo, hi);
  }
}
__global__ void add_kernel(float* x, const float* y, int64_t n) {
  pdl_begin();
  SS_GRID_STRIDE(i, n) x[i] = x[i] + y[i];
}
__global__ void mul_sigmoid_kernel(float* x, const float* g, int64_t n) {
  pdl_begin();
  SS_GRID_STRIDE(i, n) x[i] = x[i] * d_sigmoid(g[i]);
}
// One block per (row, head) of x; the same product as mul_sigmoid_kernel.
__global__ void mul_sigmoid_heads_kernel(float* x, const float* g, int heads, int hd, int64_t ld, int64_t hs) {
  pdl_begin();
  const int64_t b = blockIdx.x, r = b / heads;
  const int h = static_cast<int>(b % heads);
  float* xh = x + b * hd;
  const float* gh = g + r * ld + h * hs;
  for (int i = threadIdx.x; i < hd; i += blockDim.x) xh[i] = xh[i] * d_sigmoid(gh[i]);
}
__global__ void embedding_kernel(const void* table, bool bf16, int64_t width, const int32_t* ids, int64_t n,
                                 float* out) {
  pdl_begin();
  SS_GRID_STRIDE(t, n * width) {
    const int64_t r = t / width, c = t % width;
    const int64_t src = int64_t{ids[r]} * width + c;
    out[t] = bf16 ? bf16_to_f32(static_cast<const uint16_t*>(table)[src]) : static_cast<const float*>(table)[src];
  }
}
#undef SS_GRID_STRIDE
}  // namespace

void swiglu(const float* gate, const float* up, float* out, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  launch_pdl(swiglu_kernel, grid_for(n, kThreads), kThreads, 0, stream, gate, up, out, n);
  CUDA_CHECK_LAUNCH();
}

void swiglu_xb(const float* gate, const float* up, float* out, int64_t M, int64_t I, const XbOut& xb,
               cudaStream_t stream) {
  if (M == 0 || I == 0) return;
  launch_pdl(swiglu_xb_kernel, grid_for(xb.rows * (xb.pitch / 2), kThreads), kThreads, 0, stream, gate, up, out, M, I,
             xb);
  CUDA_CHECK_LAUNCH();
}

void add(float* x, const float* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  launch_pdl(add_kernel, grid_for(n, kThreads), kThreads, 0, stream, x, y, n);
  CUDA_CHECK_LAUNCH();
}

void mul_sigmoid(float* x, const float* gate, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  launch_pdl(mul_sigmoid_kernel, grid_for(n, kThreads), kThreads, 0, stream, x, gate, n);
  CUDA_CHECK_LAUNCH();
}

void mul_sigmoid_heads(float* x, const float* gate, int64_t rows, int heads, int hd, int64_t ld, int64_t head_stride,
                       cudaStream_t stream) {
  const int64_t blocks = rows * heads;
  if (blocks == 0 || hd == 0) return;
  const int threads = hd >= 256 ? 256 : hd >= 128 ? 128 : 64;
  launch_pdl(mul_sigmoid_heads_kernel, static_cast<unsigned>(blocks), threads, 0, stream, x, gate, heads, hd, ld,
             head_stride);
  CUDA_CHECK_LAUNCH();
}

void embedding(const void* table, bool bf16, int64_t width, const int32_t* ids, int64_t n, float* out,
               cudaStream_t stream) {
  if (n == 0 || width == 0) return;
  launch_pdl(embedding_kernel, grid_for(n * width, kThreads), kThreads, 0, stream, table, bf16, width, ids, n, out);
  CUDA_CHECK_LAUNCH();
}

}  // namespace specserve::cuda::kernels
