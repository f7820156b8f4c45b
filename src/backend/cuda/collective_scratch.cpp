// The helpers the CUDA collectives share (collective_scratch.h).
#include "backend/cuda/collective_scratch.h"

#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_scope.h"
#include "core/error.h"

namespace specserve::cuda {

void CollectiveScratch::ensure(size_t need, cudaStream_t stream) {
  if (need <= bytes) return;
  const size_t grown = std::max(need, bytes * 2);
  DeviceScope g(device);
  if (data != nullptr) {
    CUDA_CHECK(cudaStreamSynchronize(stream));
    CUDA_CHECK(cudaFree(data));
    data = nullptr;
    bytes = 0;
  }
  CUDA_CHECK(cudaMalloc(&data, grown));
  bytes = grown;
}

void CollectiveScratch::release() noexcept {
  if (data == nullptr) return;
  try {
    DeviceScope g(device);
    cudaFree(data);
  } catch (...) {  // (noexcept: a device that cannot be made current keeps its bytes until exit)
  }
  data = nullptr;
  bytes = 0;
}

void check_collective_views(std::span<const TensorView> views, int ranks, const char* what, bool contiguous) {
  SS_CHECK(static_cast<int>(views.size()) == ranks, "{}: {} views for {} ranks", what, views.size(), ranks);
  for (const TensorView& v : views) {
    SS_CHECK(v.device == Device::CUDA && v.dtype == DType::F32 && v.ndim() == 2 && v.strides[1] == 1,
             "{}: f32 device matrices with contiguous rows expected, got {}", what, v.describe());
    SS_CHECK(!contiguous || v.dim(0) <= 1 || v.strides[0] == v.dim(1), "{}: contiguous partials expected, got {}", what,
             v.describe());
  }
}

bool aliases_earlier(std::span<const TensorView> outs, size_t r) {
  for (size_t q = 0; q < r; ++q)
    if (outs[q].data == outs[r].data) return true;
  return false;
}

}  // namespace specserve::cuda
