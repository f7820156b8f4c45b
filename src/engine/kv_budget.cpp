#include "engine/kv_budget.h"

#include "backend/ops.h"

namespace specserve::engine {

int64_t blocks_for(int64_t positions) { return (positions + kKvBlockSize - 1) / kKvBlockSize; }

size_t swap_reservation(std::span<const BudgetEntry> live, int64_t total_blocks) {
  size_t bytes = 0;
  int64_t prefix_blocks = 0;
  bool in_prefix = true;
  for (const BudgetEntry& e : live) {
    if (in_prefix && prefix_blocks + e.worst_blocks <= total_blocks) {
      prefix_blocks += e.worst_blocks;
      if (e.swapped) bytes += e.swapped_bytes;
      continue;
    }
    in_prefix = false;
    bytes += e.worst_swap_bytes;
  }
  return bytes;
}

}  // namespace specserve::engine
