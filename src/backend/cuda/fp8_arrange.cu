// fp8_arrange.h: one thread per whole 16-code group of a row, its 16 bytes read, then written back at their
// fragment-order slots (fp8_code_order.h). Run once per matrix when it reaches the device.
#include <cuda_runtime.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/fp8_arrange.h"
#include "backend/cuda/fp8_code_order.h"

namespace specserve::cuda::kernels {

namespace {
__global__ void fp8_arrange_kernel(uint8_t* codes, int64_t N, int64_t groups, int64_t ldq) {
  const int64_t total = N * groups;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    uint8_t* g = codes + (i / groups) * ldq + (i % groups) * fp8o::kGroup;
    uint8_t v[fp8o::kGroup];
#pragma unroll
    for (int j = 0; j < fp8o::kGroup; ++j) v[j] = g[j];
#pragma unroll
    for (int j = 0; j < fp8o::kGroup; ++j) g[fp8o::slot_of(j)] = v[j];
  }
}
}  // namespace

void fp8_arrange_codes(uint8_t* codes, int64_t N, int64_t K, int64_t ldq, cudaStream_t stream) {
  if (ldq < K) cuda_fail(cudaErrorInvalidValue, "fp8_arrange_codes: rows overlap (ldq < K)", __FILE__, __LINE__);
  const int64_t groups = K / fp8o::kGroup;
  if (N <= 0 || groups <= 0) return;
  fp8_arrange_kernel<<<grid_for(N * groups, 256, 1u << 16), 256, 0, stream>>>(codes, N, groups, ldq);
  CUDA_CHECK_LAUNCH();
}

}  // namespace specserve::cuda::kernels
