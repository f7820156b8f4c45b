// The one-GPU collective (device_collective.h).
#include "backend/cuda/device_collective.h"

#include "backend/cuda/collective_scratch.h"
#include "backend/cuda/device_scope.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_stream.h"
#include "backend/cuda/ordered_sum.h"
#include "core/error.h"

namespace specserve::cuda {

namespace {

void copy_matrix(const TensorView& dst, int64_t col, const TensorView& src, cudaStream_t stream) {
  if (src.dim(0) == 0 || src.dim(1) == 0) return;
  CUDA_CHECK(cudaMemcpy2DAsync(dst.as<float>() + col, static_cast<size_t>(dst.strides[0]) * 4, src.data,
                               static_cast<size_t>(src.strides[0]) * 4, static_cast<size_t>(src.dim(1)) * 4,
                               static_cast<size_t>(src.dim(0)), cudaMemcpyDeviceToDevice, stream));
}

class DeviceCollective final : public Collective {
 public:
  explicit DeviceCollective(int ranks) : ranks_(ranks) { scratch_.device = current_device(); }
  ~DeviceCollective() override {
    cudaStreamSynchronize(cuda_stream());  // sums in flight may read the scratch
    scratch_.release();
  }

  int ranks() const override { return ranks_; }

  void all_reduce_sum(std::span<const TensorView> partials, std::span<const TensorView> outs) const override {
    check_collective_views(partials, ranks_, "all_reduce_sum", true);
    check_collective_views(outs, ranks_, "all_reduce_sum", false);
    const TensorView& y = outs[0];
    for (int r = 0; r < ranks_; ++r) {
      const auto q = static_cast<size_t>(r);
      SS_CHECK(partials[q].shape == y.shape && outs[q].shape == y.shape,
               "all_reduce_sum: rank {}: partial {} and output {} for output {}", r, partials[q].describe(),
               outs[q].describe(), y.describe());
    }
    const int64_t rows = y.dim(0), cols = y.dim(1), count = rows * cols;
    if (count == 0) return;
    cudaStream_t stream = cuda_stream();
    const float* gathered = partials[0].as<const float>();
    if (!side_by_side(partials, count)) {
      scratch_.ensure(static_cast<size_t>(ranks_ * count) * 4, stream);
      for (int r = 0; r < ranks_; ++r)
        CUDA_CHECK(cudaMemcpyAsync(static_cast<float*>(scratch_.data) + r * count,
                                   partials[static_cast<size_t>(r)].data, static_cast<size_t>(count) * 4,
                                   cudaMemcpyDeviceToDevice, stream));
      gathered = static_cast<const float*>(scratch_.data);
    }
    kernels::ordered_sum(gathered, ranks_, rows, cols, y.as<float>(), y.strides[0], stream);
    for (size_t r = 1; r < outs.size(); ++r)
      if (!aliases_earlier(outs, r)) copy_matrix(outs[r], 0, y, stream);
  }

  void all_gather_columns(std::span<const TensorView> parts, std::span<const TensorView> outs) const override {
    check_collective_views(parts, ranks_, "all_gather_columns", false);
    check_collective_views(outs, ranks_, "all_gather_columns", false);
    const TensorView& y = outs[0];
    int64_t total = 0;
    for (int r = 0; r < ranks_; ++r) {
      const auto q = static_cast<size_t>(r);
      SS_CHECK(parts[q].dim(0) == y.dim(0) && outs[q].shape == y.shape,
               "all_gather_columns: rank {}: part {} for output {}", r, parts[q].describe(), outs[q].describe());
      total += parts[q].dim(1);
    }
    SS_CHECK(total == y.dim(1), "all_gather_columns: {} columns for output {}", total, y.describe());
    cudaStream_t stream = cuda_stream();
    for (size_t r = 0; r < outs.size(); ++r) {
      if (aliases_earlier(outs, r)) continue;
      int64_t col = 0;
      for (const TensorView& p : parts) {
        copy_matrix(outs[r], col, p, stream);
        col += p.dim(1);
      }
    }
  }

 private:
  // Whether the partials are one [N, rows, cols] buffer in rank order.
  static bool side_by_side(std::span<const TensorView> partials, int64_t count) {
    for (size_t r = 1; r < partials.size(); ++r)
      if (partials[r].as<const float>() != partials[0].as<const float>() + static_cast<int64_t>(r) * count)
        return false;
    return true;
  }

  int ranks_;
  mutable CollectiveScratch scratch_;
};

}  // namespace

std::unique_ptr<Collective> device_collective(int ranks) {
  SS_CHECK(ranks >= 1, "a collective needs at least one rank (got {})", ranks);
  return std::make_unique<DeviceCollective>(ranks);
}

}  // namespace specserve::cuda
