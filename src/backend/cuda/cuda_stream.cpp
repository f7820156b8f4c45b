#include "backend/cuda/cuda_stream.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/step_graphs.h"

namespace specserve::cuda {

cudaStream_t launch_stream() {
  static const cudaStream_t stream = [] {
    cudaStream_t s = nullptr;
    CUDA_CHECK(cudaStreamCreate(&s));
    return s;
  }();
  return stream;
}

cudaStream_t cuda_stream() {
  flush_launches();
  return launch_stream();
}

void synchronize() { CUDA_CHECK(cudaStreamSynchronize(cuda_stream())); }

}  // namespace specserve::cuda
