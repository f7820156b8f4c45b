// The in-process collective (backend/collective.h): every rank's views in host memory.
#include "backend/collective.h"

#include <cstring>
#include <vector>

#include "core/error.h"

#if SPECSERVE_HAVE_CUDA
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/device_collective.h"
#include "backend/cuda/nccl_collective.h"
#include "backend/nccl_library.h"
#endif

namespace specserve {

namespace {

void check_views(std::span<const TensorView> views, int ranks, const char* what) {
  SS_CHECK(static_cast<int>(views.size()) == ranks, "{}: {} views for {} ranks", what, views.size(), ranks);
  for (const TensorView& v : views)
    SS_CHECK(v.device == Device::CPU && v.dtype == DType::F32 && v.ndim() == 2 && v.strides[1] == 1,
             "{}: f32 host matrices with contiguous rows expected, got {}", what, v.describe());
}

class InProcessCollective final : public Collective {
 public:
  explicit InProcessCollective(int ranks) : ranks_(ranks) {}
  int ranks() const override { return ranks_; }

  void all_reduce_sum(std::span<const TensorView> partials, std::span<const TensorView> outs) const override {
    check_views(partials, ranks_, "all_reduce_sum");
    check_views(outs, ranks_, "all_reduce_sum");
    const TensorView& y = outs[0];
    const int64_t rows = y.dim(0), cols = y.dim(1);
    for (const TensorView& p : partials)
      SS_CHECK(p.shape == y.shape, "all_reduce_sum: partial {} for output {}", p.describe(), y.describe());
    for (int64_t i = 0; i < rows; ++i) {
      float* out = y.as<float>() + i * y.strides[0];
      const float* first = partials[0].as<const float>() + i * partials[0].strides[0];
      if (out != first) std::memcpy(out, first, static_cast<size_t>(cols) * 4);
      for (int q = 1; q < ranks_; ++q) {
        const float* p =
            partials[static_cast<size_t>(q)].as<const float>() + i * partials[static_cast<size_t>(q)].strides[0];
        for (int64_t c = 0; c < cols; ++c) out[c] = out[c] + p[c];
      }
    }
    copy_to_other_outs(outs);
  }

  void all_gather_columns(std::span<const TensorView> parts, std::span<const TensorView> outs) const override {
    check_views(parts, ranks_, "all_gather_columns");
    check_views(outs, ranks_, "all_gather_columns");
    const TensorView& y = outs[0];
    int64_t col = 0;
    for (const TensorView& p : parts) {
      SS_CHECK(p.dim(0) == y.dim(0), "all_gather_columns: part {} for output {}", p.describe(), y.describe());
      for (int64_t i = 0; i < p.dim(0); ++i)
        std::memcpy(y.as<float>() + i * y.strides[0] + col, p.as<const float>() + i * p.strides[0],
                    static_cast<size_t>(p.dim(1)) * 4);
      col += p.dim(1);
    }
    SS_CHECK(col == y.dim(1), "all_gather_columns: {} columns for output {}", col, y.describe());
    copy_to_other_outs(outs);
  }

 private:
  // outs[1..] get outs[0]'s rows (skipped where a view is outs[0] itself).
  void copy_to_other_outs(std::span<const TensorView> outs) const {
    const TensorView& y = outs[0];
    for (size_t r = 1; r < outs.size(); ++r) {
      const TensorView& o = outs[r];
      if (o.data == y.data) continue;
      SS_CHECK(o.shape == y.shape, "collective: output {} beside {}", o.describe(), y.describe());
      for (int64_t i = 0; i < y.dim(0); ++i)
        std::memcpy(o.as<float>() + i * o.strides[0], y.as<const float>() + i * y.strides[0],
                    static_cast<size_t>(y.dim(1)) * 4);
    }
  }

  int ranks_;
};

}  // namespace

std::unique_ptr<Collective> in_process_collective(int ranks) {
  SS_CHECK(ranks >= 1, "a collective needs at least one rank (got {})", ranks);
  return std::make_unique<InProcessCollective>(ranks);
}

std::unique_ptr<Collective> one_memory_collective(const Memory& mem, int ranks) {
  if (mem.device() == Device::CPU) return in_process_collective(ranks);
#if SPECSERVE_HAVE_CUDA
  if (mem.device() == Device::CUDA) return cuda::device_collective(ranks);
#endif
  fail("tensor parallelism: this build has no collective for ranks in device memory (no CUDA backend)");
}

std::unique_ptr<Collective> placed_collective(std::span<const Memory* const> memories,
                                              const std::string& nccl_library) {
  SS_CHECK(!memories.empty(), "a collective needs at least one rank");
  const int n = static_cast<int>(memories.size());
  bool one = true, host = true;
  for (const Memory* m : memories) {
    one = one && m == memories[0];
    host = host && m->device() == Device::CPU;
  }
  if (one) return one_memory_collective(*memories[0], n);
  if (host) return in_process_collective(n);
#if SPECSERVE_HAVE_CUDA
  std::vector<cuda::NcclRank> ranks;
  for (const Memory* m : memories) {
    SS_CHECK(m->device() == Device::CUDA && m->device_index() >= 0,
             "tensor parallelism: ranks placed on the host and on GPUs at once");
    for (const cuda::NcclRank& r : ranks)
      SS_CHECK(r.device != m->device_index(), "tensor parallelism: two ranks placed on CUDA device {}", r.device);
    ranks.push_back({m->device_index(), nullptr});  // each device's own stream (cuda_stream.h)
  }
  // The backend reads device properties once, from the first device (backend/cuda/device_scope.h).
  const cuda::DeviceInfo first = cuda::device_info(ranks[0].device);
  for (const cuda::NcclRank& r : ranks) {
    const cuda::DeviceInfo d = cuda::device_info(r.device);
    SS_CHECK(d.name == first.name && d.sm_major == first.sm_major && d.sm_minor == first.sm_minor,
             "tensor parallelism over GPUs of different models (device {}: {}, device {}: {}); run on GPUs of one "
             "model (CUDA_VISIBLE_DEVICES)",
             ranks[0].device, first.name, r.device, d.name);
  }
  return cuda::nccl_collective(nccl::load_nccl_library(nccl_library), std::move(ranks));
#else
  fail("tensor parallelism: this build has no collective for ranks in device memory (no CUDA backend)");
#endif
}

}  // namespace specserve
