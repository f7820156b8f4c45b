#pragma once
// The NCCL communicators of one process that drives every GPU of a tensor-parallel model (docs/DESIGN.md §6.4):
// rank r on devices[r], all created at once by ncclCommInitAll, every collective issued as one NCCL group
// over all ranks from the one calling thread. No CUDA headers: streams are passed through as nccl::Stream.
//
// NVLink multicast (NVLS) is switched off before the communicators are created: NCCL_NVLS_ENABLE=0 is set in
// this process's environment, overriding any value it had. The collective of §6.2 only gathers (copies),
// which NVLS would not speed up much, and multicast objects on a host whose GPUs others share can put those
// GPUs out of service; so specserve never asks for it.
//
// Failure: an NCCL call that fails, or an asynchronous error NCCL reports later (a peer's GPU failed, a
// transport broke), aborts every communicator at once (ncclCommAbort), so no rank's kernel is left waiting
// for a peer, and throws Error naming the call and NCCL's message. Every later use throws too; the process is
// expected to report the failure and exit (§6.4).
//
//   NcclCommunicators comms(load_nccl_library(""), {0, 1});
//   comms.group("ncclAllGather", [&](int r) { return api.all_gather(send[r], recv[r], n, kFloat32,
//                                                                   comms.comm(r), stream[r]); });
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backend/nccl_library.h"

namespace specserve::nccl {

// Sets NCCL_NVLS_ENABLE=0 in this process's environment (NCCL reads it when a communicator is created).
void disable_nvlink_multicast();

class NcclCommunicators {
 public:
  // Devices: distinct CUDA device indices, at least one; rank r runs on devices[r].
  NcclCommunicators(std::shared_ptr<const NcclLibrary> lib, std::vector<int> devices);
  // Destroys every communicator (each waits for its own pending work); after a failure they were aborted.
  ~NcclCommunicators();
  NcclCommunicators(const NcclCommunicators&) = delete;
  NcclCommunicators& operator=(const NcclCommunicators&) = delete;

  int ranks() const { return static_cast<int>(devices_.size()); }
  int device(int rank) const { return devices_[static_cast<size_t>(rank)]; }
  Comm comm(int rank) const { return comms_[static_cast<size_t>(rank)]; }
  const NcclLibrary& library() const { return *lib_; }
  bool aborted() const { return aborted_; }

  // Checks for asynchronous errors, then runs enqueue(r) for r = 0 … N−1 between ncclGroupStart and
  // ncclGroupEnd (enqueue issues rank r's part of one collective and returns NCCL's result). Throws after
  // aborting every communicator when any call fails; `what` names the collective in the message.
  void group(std::string_view what, const std::function<Result(int rank)>& enqueue) const;
  // Throws, after aborting every communicator, when NCCL reports an asynchronous error on any rank.
  void check_async() const;

 private:
  [[noreturn]] void abort_and_fail(const std::string& message) const;
  void abort_all() const noexcept;

  std::shared_ptr<const NcclLibrary> lib_;
  std::vector<int> devices_;
  std::vector<Comm> comms_;
  mutable bool aborted_ = false;
};

}  // namespace specserve::nccl
