// The communicators of one process driving every GPU (backend/nccl_communicators.h): ncclCommInitAll, grouped
// collectives, asynchronous-error polling and abort-on-failure.
#include "backend/nccl_communicators.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>

#include "core/error.h"

namespace specserve::nccl {

void disable_nvlink_multicast() { setenv("NCCL_NVLS_ENABLE", "0", 1); }

NcclCommunicators::NcclCommunicators(std::shared_ptr<const NcclLibrary> lib, std::vector<int> devices)
    : lib_(std::move(lib)), devices_(std::move(devices)) {
  SS_CHECK(lib_ != nullptr, "NCCL communicators need a loaded NCCL library");
  SS_CHECK(!devices_.empty(), "NCCL communicators need at least one CUDA device");
  for (size_t i = 0; i < devices_.size(); ++i) {
    SS_CHECK(devices_[i] >= 0, "rank {}: CUDA device {} is not a device index", i, devices_[i]);
    for (size_t j = 0; j < i; ++j)
      SS_CHECK(devices_[i] != devices_[j],
               "CUDA device {} is listed for ranks {} and {}: NCCL runs one rank per GPU, so tensor parallelism "
               "over N ranks needs N distinct GPUs",
               devices_[i], j, i);
  }
  disable_nvlink_multicast();
  comms_.assign(devices_.size(), nullptr);
  const Result r = lib_->api().comm_init_all(comms_.data(), ranks(), devices_.data());
  if (r != kSuccess) {
    const std::string why = lib_->describe(r);
    comms_.clear();  // what a failed init leaves is NCCL's to clean up, not ours to destroy
    fail("NCCL ncclCommInitAll over CUDA devices {} failed: {}", fmt::join(devices_, ", "), why);
  }
}

NcclCommunicators::~NcclCommunicators() {
  if (aborted_) return;
  for (Comm c : comms_)
    if (c != nullptr) lib_->api().comm_destroy(c);
}

void NcclCommunicators::abort_all() const noexcept {
  if (aborted_) return;
  aborted_ = true;
  for (Comm c : comms_)
    if (c != nullptr) lib_->api().comm_abort(c);
}

void NcclCommunicators::abort_and_fail(const std::string& message) const {
  abort_all();
  throw Error(message + " (every NCCL communicator of this process was aborted)");
}

void NcclCommunicators::check_async() const {
  SS_CHECK(!aborted_, "the NCCL communicators were aborted after an earlier error; the process has to restart");
  const Api& api = lib_->api();
  for (int r = 0; r < ranks(); ++r) {
    Result async = kSuccess;
    const Result q = api.comm_get_async_error(comm(r), &async);
    if (q != kSuccess)
      abort_and_fail(fmt::format("NCCL ncclCommGetAsyncError on rank {} (CUDA device {}) failed: {}", r, device(r),
                                 lib_->describe(q, comm(r))));
    if (async != kSuccess && async != kInProgress)
      abort_and_fail(fmt::format("NCCL rank {} (CUDA device {}) reported an error: {}", r, device(r),
                                 lib_->describe(async, comm(r))));
  }
}

void NcclCommunicators::group(std::string_view what, const std::function<Result(int rank)>& enqueue) const {
  check_async();
  const Api& api = lib_->api();
  const Result start = api.group_start();
  if (start != kSuccess) abort_and_fail(fmt::format("NCCL ncclGroupStart failed: {}", lib_->describe(start)));
  std::string error;
  for (int r = 0; r < ranks() && error.empty(); ++r) {
    const Result res = enqueue(r);
    if (res != kSuccess)
      error = fmt::format("NCCL {} on rank {} (CUDA device {}) failed: {}", what, r, device(r),
                          lib_->describe(res, comm(r)));
  }
  const Result end = api.group_end();
  if (error.empty() && end != kSuccess)
    error = fmt::format("NCCL {} (ncclGroupEnd) failed: {}", what, lib_->describe(end));
  if (!error.empty()) abort_and_fail(error);
}

}  // namespace specserve::nccl
