#pragma once
// The tensor-parallel Collective (backend/collective.h) over NCCL, for one process driving every GPU
// (docs/DESIGN.md §6.4, §6.5). It keeps the bit rule of §6.2 the way the CPU simulation does:
//
//   all_reduce_sum: ncclAllGather of every rank's partial [rows, cols] into a [N, rows, cols] buffer on each
//     rank (exact copies, whatever algorithm, protocol or chunking NCCL picks for the size), then on each rank
//     the in-order sum ((p0 + p1) + …) + p(N−1) by kernels::ordered_sum (ordered_sum.h), the CPU simulation's
//     order and rounding. An element's bits depend on its N partials only, never on the row count, so a row
//     of a 16-row verify equals the same row decoded alone, and every rank's replica is bit-identical.
//   all_gather_columns: each part padded to the widest part's columns, one ncclAllGather, then 2-D copies of
//     the column blocks into place (copies: exact).
//
// Views: rank r's partials, parts and outputs are f32 device matrices on rank r's device with contiguous rows;
// partials must be fully contiguous. Outputs may alias each other only where ranks share memory (N = 1: one
// view for every rank). Work is enqueued on each rank's stream in stream order after what produced the
// inputs; nothing waits on the host. Rank r's gather buffer (N × the largest call's bytes) lives on its
// device for the collective's life.
//
// Its GPU tests (tests/backend_cuda/test_cuda_nccl_collective.cpp) use one GPU: one NCCL rank, and the in-order
// sum for N up to 4 against the CPU simulation. Several ranks through NCCL have not run.
#include <cuda_runtime_api.h>

#include <memory>
#include <vector>

#include "backend/collective.h"
#include "backend/nccl_library.h"

namespace specserve::cuda {

struct NcclRank {
  int device = 0;
  // The rank's stream; nullptr: its device's cuda_stream() (the ops' stream there, device_scope.h), taken
  // afresh at every call so the launches recorded before it are enqueued first.
  cudaStream_t stream = nullptr;
};

// Creates one NCCL communicator per rank (nccl::NcclCommunicators: ncclCommInitAll, NVLink multicast off).
// Throws Error when NCCL fails or the ranks are not distinct devices.
std::unique_ptr<Collective> nccl_collective(std::shared_ptr<const nccl::NcclLibrary> lib, std::vector<NcclRank> ranks);

}  // namespace specserve::cuda
