// The in-order sum over ranks (ordered_sum.h): one thread per output element, a grid-stride loop.
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/ordered_sum.h"

namespace specserve::cuda::kernels {

namespace {

__global__ void ordered_sum_kernel(const float* __restrict__ gathered, int ranks, int64_t rows, int64_t cols,
                                   float* __restrict__ out, int64_t ldo) {
  const int64_t count = rows * cols;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += step) {
    float s = gathered[i];
    // __fadd_rn: IEEE addition rounded to nearest, which the compiler may not contract or reorder.
    for (int q = 1; q < ranks; ++q) s = __fadd_rn(s, gathered[static_cast<int64_t>(q) * count + i]);
    const int64_t row = i / cols;
    out[row * ldo + (i - row * cols)] = s;
  }
}

}  // namespace

void ordered_sum(const float* gathered, int ranks, int64_t rows, int64_t cols, float* out, int64_t ldo,
                 cudaStream_t stream) {
  const int64_t count = rows * cols;
  if (count == 0) return;
  constexpr int kThreads = 256;
  const int64_t blocks = (count + kThreads - 1) / kThreads;
  ordered_sum_kernel<<<static_cast<unsigned>(blocks < 8192 ? blocks : 8192), kThreads, 0, stream>>>(
      gathered, ranks, rows, cols, out, ldo);
  CUDA_CHECK_LAUNCH();
}

}  // namespace specserve::cuda::kernels
