#include "backend/cuda/cuda_stream.h"

#include "backend/cuda/cuda_check.h"

namespace specserve::cuda {

cudaStream_t cuda_stream() {
  static const cudaStream_t stream = [] {
    cudaStream_t s = nullptr;
    CUDA_CHECK(cudaStreamCreate(&s));
    return s;
  }();
  return stream;
}

void synchronize() { CUDA_CHECK(cudaStreamSynchronize(cuda_stream())); }

}  // namespace specserve::cuda
