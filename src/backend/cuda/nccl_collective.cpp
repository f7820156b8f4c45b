// The NCCL collective (nccl_collective.h): all-gathers through NCCL, the in-order sum and the column
// placement on each rank's stream.
#include "backend/cuda/nccl_collective.h"

#include <algorithm>
#include <span>

#include "backend/cuda/collective_scratch.h"
#include "backend/cuda/device_scope.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_stream.h"
#include "backend/cuda/ordered_sum.h"
#include "backend/nccl_communicators.h"
#include "core/error.h"

namespace specserve::cuda {

namespace {

class NcclCollective final : public Collective {
 public:
  NcclCollective(std::shared_ptr<const nccl::NcclLibrary> lib, std::vector<NcclRank> ranks) : ranks_(std::move(ranks)) {
    std::vector<int> devices;
    const int present = device_count();
    for (size_t r = 0; r < ranks_.size(); ++r) {
      SS_CHECK(ranks_[r].device >= 0 && ranks_[r].device < present,
               "NCCL rank {} on CUDA device {}: this machine has {} CUDA device(s)", r, ranks_[r].device, present);
      devices.push_back(ranks_[r].device);
    }
    // ncclCommInitAll visits every device: the caller's is made current again after (current_device()'s
    // cache still names it).
    const int caller = current_device();
    comms_ = std::make_unique<nccl::NcclCommunicators>(std::move(lib), devices);
    CUDA_CHECK(cudaSetDevice(caller));
    gather_.resize(ranks_.size());
    send_.resize(ranks_.size());
    for (size_t r = 0; r < ranks_.size(); ++r) gather_[r].device = send_[r].device = ranks_[r].device;
  }

  ~NcclCollective() override {
    // The gathers and sums in flight read the scratch: let every stream drain before it is freed.
    if (!comms_->aborted()) try {
        for (size_t r = 0; r < ranks_.size(); ++r) {
          DeviceScope g(ranks_[r].device);
          cudaStreamSynchronize(stream_of(r));
        }
      } catch (const Error&) {
      }
    for (CollectiveScratch& s : gather_) s.release();
    for (CollectiveScratch& s : send_) s.release();
  }

  int ranks() const override { return static_cast<int>(ranks_.size()); }

  void all_reduce_sum(std::span<const TensorView> partials, std::span<const TensorView> outs) const override {
    const int n = ranks();
    check_collective_views(partials, n, "all_reduce_sum", true);
    check_collective_views(outs, n, "all_reduce_sum", false);
    const TensorView& y = outs[0];
    for (size_t r = 0; r < ranks_.size(); ++r)
      SS_CHECK(partials[r].shape == y.shape && outs[r].shape == y.shape,
               "all_reduce_sum: rank {}: partial {} and output {} for output {}", r, partials[r].describe(),
               outs[r].describe(), y.describe());
    const int64_t rows = y.dim(0), cols = y.dim(1), count = rows * cols;
    const std::vector<cudaStream_t> streams = current_streams();
    if (count == 0) return comms_->check_async();
    for (size_t r = 0; r < ranks_.size(); ++r) gather_[r].ensure(static_cast<size_t>(n * count) * 4, streams[r]);
    const nccl::Api& api = comms_->library().api();
    comms_->group("ncclAllGather (all_reduce_sum)", [&](int r) {
      const auto q = static_cast<size_t>(r);
      return api.all_gather(partials[q].data, gather_[q].data, static_cast<size_t>(count), nccl::kFloat32,
                            comms_->comm(r), streams[q]);
    });
    for (size_t r = 0; r < ranks_.size(); ++r) {
      if (aliases_earlier(outs, r)) continue;
      DeviceScope g(ranks_[r].device);
      kernels::ordered_sum(static_cast<const float*>(gather_[r].data), n, rows, cols, outs[r].as<float>(),
                           outs[r].strides[0], streams[r]);
    }
  }

  void all_gather_columns(std::span<const TensorView> parts, std::span<const TensorView> outs) const override {
    const int n = ranks();
    check_collective_views(parts, n, "all_gather_columns", false);
    check_collective_views(outs, n, "all_gather_columns", false);
    const TensorView& y = outs[0];
    const int64_t rows = y.dim(0);
    int64_t total = 0, widest = 0;
    for (size_t r = 0; r < ranks_.size(); ++r) {
      SS_CHECK(parts[r].dim(0) == rows && outs[r].shape == y.shape,
               "all_gather_columns: rank {}: part {} for output {}", r, parts[r].describe(), outs[r].describe());
      total += parts[r].dim(1);
      widest = std::max(widest, parts[r].dim(1));
    }
    SS_CHECK(total == y.dim(1), "all_gather_columns: {} columns for output {}", total, y.describe());
    const int64_t count = rows * widest;
    const std::vector<cudaStream_t> streams = current_streams();
    if (count == 0) return comms_->check_async();
    std::vector<const void*> send(ranks_.size());
    for (size_t r = 0; r < ranks_.size(); ++r) {
      const TensorView& p = parts[r];
      if (p.dim(1) == widest && (rows == 1 || p.strides[0] == widest)) {
        send[r] = p.data;
        continue;
      }
      send_[r].ensure(static_cast<size_t>(count) * 4, streams[r]);
      send[r] = send_[r].data;
      if (p.dim(1) == 0) continue;
      DeviceScope g(ranks_[r].device);
      CUDA_CHECK(cudaMemcpy2DAsync(send_[r].data, static_cast<size_t>(widest) * 4, p.data,
                                   static_cast<size_t>(p.strides[0]) * 4, static_cast<size_t>(p.dim(1)) * 4,
                                   static_cast<size_t>(rows), cudaMemcpyDeviceToDevice, streams[r]));
    }
    for (size_t r = 0; r < ranks_.size(); ++r) gather_[r].ensure(static_cast<size_t>(n * count) * 4, streams[r]);
    const nccl::Api& api = comms_->library().api();
    comms_->group("ncclAllGather (all_gather_columns)", [&](int r) {
      const auto q = static_cast<size_t>(r);
      return api.all_gather(send[q], gather_[q].data, static_cast<size_t>(count), nccl::kFloat32, comms_->comm(r),
                            streams[q]);
    });
    for (size_t r = 0; r < ranks_.size(); ++r) {
      if (aliases_earlier(outs, r)) continue;
      DeviceScope g(ranks_[r].device);
      int64_t col = 0;
      for (size_t q = 0; q < ranks_.size(); ++q) {
        const int64_t c = parts[q].dim(1);
        if (c > 0)
          CUDA_CHECK(cudaMemcpy2DAsync(outs[r].as<float>() + col, static_cast<size_t>(outs[r].strides[0]) * 4,
                                       static_cast<const float*>(gather_[r].data) + static_cast<int64_t>(q) * count,
                                       static_cast<size_t>(widest) * 4, static_cast<size_t>(c) * 4,
                                       static_cast<size_t>(rows), cudaMemcpyDeviceToDevice, streams[r]));
        col += c;
      }
    }
  }

 private:
  // The rank's stream, or its device's ops stream (cuda_stream(), taken with the device current, so the launches
  // recorded there so far are enqueued first).
  cudaStream_t stream_of(size_t r) const {
    if (ranks_[r].stream != nullptr) return ranks_[r].stream;
    DeviceScope g(ranks_[r].device);
    return cuda_stream();
  }
  std::vector<cudaStream_t> current_streams() const {
    std::vector<cudaStream_t> s;
    for (size_t r = 0; r < ranks_.size(); ++r) s.push_back(stream_of(r));
    return s;
  }

  std::unique_ptr<nccl::NcclCommunicators> comms_;  // declared first: destroyed after the scratch is freed
  std::vector<NcclRank> ranks_;
  mutable std::vector<CollectiveScratch> gather_, send_;
};

}  // namespace

std::unique_ptr<Collective> nccl_collective(std::shared_ptr<const nccl::NcclLibrary> lib, std::vector<NcclRank> ranks) {
  SS_CHECK(!ranks.empty(), "an NCCL collective needs at least one rank");
  return std::make_unique<NcclCollective>(std::move(lib), std::move(ranks));
}

}  // namespace specserve::cuda
