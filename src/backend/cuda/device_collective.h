#pragma once
// The tensor-parallel Collective (backend/collective.h) for N ranks that all live on one GPU — the ops'
// device and stream (cuda_stream.h): the one-GPU run of the sharded model (docs/DESIGN.md §6.5), which puts
// the sharded forward, its kernels at each rank's shapes and the in-order reduction on the GPU before several
// GPUs are at hand. It keeps the bit rule of §6.2 the way the NCCL collective does (nccl_collective.h), with
// device-to-device copies in place of the all-gather:
//
//   all_reduce_sum: the partials side by side as [N, rows, cols] (read in place when they already are one
//     buffer in rank order, else copied into a scratch buffer), then kernels::ordered_sum into the first
//     output: ((p0 + p1) + p2) + … + p(N−1) in f32, the CPU simulation's order and rounding; the other
//     outputs (where they are not the same view) get copies.
//   all_gather_columns: 2-D copies of each part's columns into place in each output.
//
// Views: f32 device matrices with contiguous rows; partials contiguous as a whole. Work is enqueued on the
// ops' stream after every launch recorded before the call; nothing waits on the host.
#include <memory>

#include "backend/collective.h"

namespace specserve::cuda {

std::unique_ptr<Collective> device_collective(int ranks);

}  // namespace specserve::cuda
