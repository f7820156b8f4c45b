#pragma once
// Stands in for src/backend/cuda/gated_deltanet_chunked_ptx.cuh in the host emulation. A cp.async is held
// per thread until a wait completes its group (the bytes read at issue: the sources do not change while
// copies are in flight), so a tile read before its wait shows the shared memory's previous bytes (NaN at
// first) and the results differ; copies still in flight when a thread ends abort the run.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "cuda_emu.h"

namespace specserve::cuda::kernels::gdn_ptx {

struct PendingCopy {
  float* dst;
  unsigned char bytes[16];
  long group;  // -1: not committed yet
};
struct ThreadCopies {
  std::vector<PendingCopy> pending;
  long committed = 0;
};
inline std::vector<ThreadCopies>& thread_copies() {
  static std::vector<ThreadCopies> t(1024);
  return t;
}
inline ThreadCopies& mine() { return thread_copies()[size_t(emu::current)]; }

inline void cp_async16(float* dst, const float* src) {
  PendingCopy c{dst, {}, -1};
  std::memcpy(c.bytes, src, 16);
  mine().pending.push_back(c);
}
inline void cp_async_commit() {
  ThreadCopies& t = mine();
  ++t.committed;
  for (PendingCopy& c : t.pending)
    if (c.group < 0) c.group = t.committed;
}
// Completes the copies of every committed group but the newest n.
inline void complete_all_but(long n) {
  ThreadCopies& t = mine();
  std::vector<PendingCopy> keep;
  for (const PendingCopy& c : t.pending) {
    if (c.group >= 0 && c.group <= t.committed - n)
      std::memcpy(c.dst, c.bytes, 16);
    else
      keep.push_back(c);
  }
  t.pending.swap(keep);
}
template <int N>
inline void cp_async_wait_group() {
  complete_all_but(N);
}
inline void cp_async_wait_all() {
  cp_async_commit();
  complete_all_but(0);
}
// The items' ready counts: the grids run one after the other here, so a count is complete before any
// block waits for it; one that is not (a state block that did not count itself in), or that went past
// n (one that counted twice), would hang or race on a GPU and aborts the run.
inline void ready_add(unsigned* count) { ++*count; }
inline void ready_wait(const unsigned* count, unsigned n) {
  if (*count != n) {
    std::fprintf(stderr, "gdn_emulation: an item's ready count is %u, not %u\n", *count, n);
    std::fflush(stderr);
    std::_Exit(1);  // from a thread's fiber: no exit handlers
  }
}

// Called when a block ends: no copy may still be in flight.
inline void check_no_copies_in_flight() {
  for (ThreadCopies& t : thread_copies()) {
    if (!t.pending.empty()) {
      std::fprintf(stderr, "gdn_emulation: a thread ended with %zu cp.async in flight\n", t.pending.size());
      std::exit(1);
    }
    t.committed = 0;
  }
}

inline const bool registered = (emu::after_block = check_no_copies_in_flight, true);

}  // namespace specserve::cuda::kernels::gdn_ptx
