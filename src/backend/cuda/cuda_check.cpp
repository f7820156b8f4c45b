#include "backend/cuda/cuda_check.h"

#include "core/error.h"

namespace specserve::cuda {

void cuda_fail(cudaError_t err, const char* expr, const char* file, int line) {
  // Clears a non-sticky error so the next call does not report it again.
  cudaGetLastError();
  fail("CUDA error {} ({}) in {} at {}:{}", cudaGetErrorName(err), cudaGetErrorString(err), expr, file, line);
}

}  // namespace specserve::cuda
