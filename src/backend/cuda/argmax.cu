// argmax over rows (backend/cpu/argmax.cpp is the reference): one block per row. Each thread scans
// its strided entries in increasing index with a strict comparison, then the block merges the
// (value, index) pairs taking the larger value and, on equal values, the lower index — a selection,
// not arithmetic, so the result is the CPU's whatever the merge order.
#include <cuda_runtime.h>

#include <cfloat>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"

namespace specserve::cuda::kernels {

namespace {
constexpr int kThreads = 512;

struct Best {
  float v;
  int32_t i;  // -1: nothing finite seen
};

__device__ __forceinline__ Best better(Best a, Best b) {
  if (b.i < 0) return a;
  if (a.i < 0) return b;
  if (b.v > a.v || (b.v == a.v && b.i < a.i)) return b;
  return a;
}

__global__ void __launch_bounds__(kThreads) argmax_kernel(const float* x, int64_t ld, int64_t n, int32_t* out) {
  pdl_begin();
  const float* row = x + blockIdx.x * ld;
  Best b{-INFINITY, -1};
  for (int64_t i = threadIdx.x; i < n; i += kThreads) {
    float v = row[i];
    if (isnan(v) || v == -INFINITY) continue;  // NaN reads as -inf; -inf is never a maximum
    if (v == INFINITY) v = FLT_MAX;
    if (b.i < 0 || v > b.v) b = {v, static_cast<int32_t>(i)};
  }
  for (int off = 16; off > 0; off >>= 1) {
    Best o{__shfl_xor_sync(0xffffffffu, b.v, off), __shfl_xor_sync(0xffffffffu, b.i, off)};
    b = better(b, o);
  }
  __shared__ Best warps[kThreads / 32];
  if ((threadIdx.x & 31) == 0) warps[threadIdx.x >> 5] = b;
  __syncthreads();
  if (threadIdx.x == 0) {
    Best r = warps[0];
    for (int w = 1; w < kThreads / 32; ++w) r = better(r, warps[w]);
    out[blockIdx.x] = r.i;
  }
}
}  // namespace

void argmax(const float* x, int64_t ld, int64_t rows, int64_t n, int32_t* out, cudaStream_t stream) {
  if (rows == 0) return;
  launch_pdl(argmax_kernel, static_cast<unsigned>(rows), kThreads, 0, stream, x, ld, n, out);
  CUDA_CHECK_LAUNCH();
}

}  // namespace specserve::cuda::kernels
