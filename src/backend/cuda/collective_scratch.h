#pragma once
// What the CUDA collectives share (nccl_collective.cpp, device_collective.cpp): a grow-only scratch buffer on
// one device, and the checks of the views a Collective call takes. (DeviceScope, device_scope.h, makes a
// device current.)
#include <cuda_runtime_api.h>

#include <cstddef>
#include <span>

#include "core/tensor.h"

namespace specserve::cuda {

// A device buffer that only grows (the old one is freed once `stream` has drained: work in flight may read
// it). release() frees it; the owner calls it once the streams that use it have drained.
struct CollectiveScratch {
  int device = 0;
  void* data = nullptr;
  size_t bytes = 0;

  void ensure(size_t need, cudaStream_t stream);
  void release() noexcept;
};

// `views` holds one view per rank, each an f32 device matrix with contiguous rows (`contiguous`: and
// contiguous as a whole, as a copy of the whole partial needs); throws Error naming `what` otherwise.
void check_collective_views(std::span<const TensorView> views, int ranks, const char* what, bool contiguous);

// True when outs[r] is an earlier rank's output (ranks sharing memory): it already holds the result.
bool aliases_earlier(std::span<const TensorView> outs, size_t r);

}  // namespace specserve::cuda
