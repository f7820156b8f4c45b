#pragma once
// CUDA_CHECK(expr): runs a CUDA runtime call and throws specserve::Error (core/error.h) with the
// call, the CUDA error string and the source location when it fails. Usable from .cu files (C++17)
// and .cpp files alike: the throwing part lives in cuda_check.cpp, so nvcc never sees fmt.
#include <cuda_runtime_api.h>

namespace specserve::cuda {

[[noreturn]] void cuda_fail(cudaError_t err, const char* expr, const char* file, int line);

}  // namespace specserve::cuda

#define CUDA_CHECK(expr)                                                                                    \
  do {                                                                                                      \
    const cudaError_t ss_cuda_err_ = (expr);                                                                \
    if (ss_cuda_err_ != cudaSuccess) ::specserve::cuda::cuda_fail(ss_cuda_err_, #expr, __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: reports launch-configuration errors (asynchronous faults surface at the
// next synchronising call).
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())
