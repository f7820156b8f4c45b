#include "backend/cuda/cuda_stream.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_scope.h"
#include "backend/cuda/step_graphs.h"

namespace specserve::cuda {

cudaStream_t launch_stream() {
  // One stream a device (device_scope.h), created on the device's first use.
  static PerDevice<cudaStream_t> streams;
  return streams.get(current_device(), [](int) {
    auto* s = new cudaStream_t(nullptr);
    CUDA_CHECK(cudaStreamCreate(s));
    return s;
  });
}

cudaStream_t cuda_stream() {
  flush_launches();
  return launch_stream();
}

void synchronize() { CUDA_CHECK(cudaStreamSynchronize(cuda_stream())); }

}  // namespace specserve::cuda
