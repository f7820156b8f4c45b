#pragma once
// Admission control: a sequence is admitted only when its worst case fits, i.e. KV blocks for
// prompt + max_tokens + the verify overhang (γ + 1 rows) and one state slot. Reserving the worst
// case up front means a running sequence never runs out of memory and is never preempted (a
// preempted sequence would be recomputed through prefill kernels instead of decode kernels, and its
// output could change — docs/DESIGN.md §1), at the cost of admitting fewer sequences when requests ask
// for long completions. Requests that do not fit wait in the queue.
#include <cstdint>

namespace specserve::engine {

class KvBudget {
 public:
  KvBudget(int64_t total_blocks, int max_seqs) : total_blocks_(total_blocks), max_seqs_(max_seqs) {}

  static int64_t blocks_for(int64_t positions);

  // Reserves blocks for a sequence of up to `positions` positions; false if it does not fit now.
  bool try_reserve(int64_t positions);
  void release(int64_t positions);
  // True if a sequence of `positions` could ever be admitted (on an empty engine).
  bool could_ever_fit(int64_t positions) const { return blocks_for(positions) <= total_blocks_ && max_seqs_ > 0; }

  int64_t total_blocks() const { return total_blocks_; }
  int64_t reserved_blocks() const { return reserved_blocks_; }
  int sequences() const { return sequences_; }

 private:
  int64_t total_blocks_;
  int max_seqs_;
  int64_t reserved_blocks_ = 0;
  int sequences_ = 0;
};

}  // namespace specserve::engine
