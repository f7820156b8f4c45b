#pragma once
// Runs fn(begin, end) over [0, n) rows, in parallel when the work is large enough to pay for waking
// the pool. Row kernels compute each row independently, so the split never changes a result.
#include <cstdint>
#include <functional>

#include "core/thread_pool.h"

namespace specserve::cpu {

inline void for_rows(int64_t n, int64_t work_per_row, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 1 || n * work_per_row < (1 << 15))
    fn(0, n);
  else
    ThreadPool::global().parallel_for(n, fn, 1);
}

}  // namespace specserve::cpu
