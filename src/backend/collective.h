#pragma once
// The collectives of tensor parallelism (docs/DESIGN.md §6.2), called by the process that drives every rank:
// each argument is a list with one view per rank, in rank order.
//
// The reduction keeps the bit rule (docs/DESIGN.md §1.1): all_reduce_sum adds the ranks' partials element by
// element in the fixed order ((p0 + p1) + p2) + … + p(N−1), in f32. An element's result is a function of that
// element's N partials only: not of how many rows the call holds, how the bytes are chunked or which algorithm
// moved them. A row therefore gets the same bits in a one-row decode and in a 16-row verify whenever its
// partials do, which the row-invariant ops on every rank guarantee. (A multi-GPU implementation keeps this by
// gathering the partials, exact copies, and summing them in rank order on every rank — never by a ring or
// tree all-reduce, whose order of additions depends on the message size.)
//
//   auto c = in_process_collective(2);
//   TensorView parts[] = {p0, p1}, outs[] = {x, x};
//   c->all_reduce_sum(parts, outs);   // x = p0 + p1
#include <memory>
#include <span>
#include <string>

#include "backend/memory.h"
#include "core/tensor.h"

namespace specserve {

class Collective {
 public:
  virtual ~Collective() = default;
  virtual int ranks() const = 0;
  // outs[r] <- Σ_q partials[q], q = 0, 1, …, N−1 in that order, for every rank r. All views are f32 matrices of
  // one shape with contiguous rows; outs may alias each other (a replicated activation held once) but no
  // partial.
  virtual void all_reduce_sum(std::span<const TensorView> partials, std::span<const TensorView> outs) const = 0;
  // outs[r] <- the column blocks parts[0] | parts[1] | … | parts[N−1] side by side (exact copies): the
  // vocabulary-split logits. parts[q] is [rows, c_q]; outs[r] is [rows, Σ c_q].
  virtual void all_gather_columns(std::span<const TensorView> parts, std::span<const TensorView> outs) const = 0;
};

// Every rank in this process's host memory: the CPU simulation of tensor parallelism.
std::unique_ptr<Collective> in_process_collective(int ranks);

// Every rank in `mem`: the host (in_process_collective) or one GPU (cuda/device_collective.h, the one-GPU run
// of the sharded model). The same sums in the same order either way.
std::unique_ptr<Collective> one_memory_collective(const Memory& mem, int ranks);

// The collective of ranks placed in `memories` (rank r's buffers in memories[r]): all in one memory,
// one_memory_collective; host memories, in_process_collective; one GPU each (distinct devices), NCCL over them
// (cuda/nccl_collective.h; libnccl.so.2 from `nccl_library`, else the loader's search: backend/nccl_library.h).
// Throws Error for another mix, or when NCCL does not load.
std::unique_ptr<Collective> placed_collective(std::span<const Memory* const> memories, const std::string& nccl_library);

}  // namespace specserve
