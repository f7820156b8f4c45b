#include "engine/kv_budget.h"

#include "backend/ops.h"
#include "core/error.h"

namespace specserve::engine {

int64_t KvBudget::blocks_for(int64_t positions) { return (positions + kKvBlockSize - 1) / kKvBlockSize; }

bool KvBudget::try_reserve(int64_t positions) {
  int64_t need = blocks_for(positions);
  if (sequences_ >= max_seqs_ || reserved_blocks_ + need > total_blocks_) return false;
  reserved_blocks_ += need;
  ++sequences_;
  return true;
}

void KvBudget::release(int64_t positions) {
  int64_t need = blocks_for(positions);
  SS_CHECK(sequences_ > 0 && reserved_blocks_ >= need, "KvBudget::release without a matching reserve");
  reserved_blocks_ -= need;
  --sequences_;
}

}  // namespace specserve::engine
