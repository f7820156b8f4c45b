#include "engine/engine_options.h"

#include <algorithm>

namespace specserve::engine {

EngineOptions normalised(EngineOptions o) {
  o.max_seqs = std::max(1, o.max_seqs);
  o.max_queue = std::max(0, o.max_queue);
  o.gamma = std::max(0, o.gamma);
  o.spec_max_batch = std::max(0, o.spec_max_batch);
  o.prefix_cache_state_interval = std::max(64, o.prefix_cache_state_interval / 64 * 64);
  const int extend_rows = o.max_seqs * (o.gamma + 1);
  // Decode/verify rows are scheduled first; a step must still have room for one prefill chunk
  // after them, or a new request could wait forever. Shrink the chunk first (to a multiple of 64,
  // at least 64), and only then grow the row budget.
  int room = (o.max_batch_rows - extend_rows) / 64 * 64;
  o.prefill_chunk = std::max(64, std::min(o.prefill_chunk / 64 * 64, room));
  o.max_batch_rows = std::max(o.max_batch_rows, extend_rows + o.prefill_chunk);
  return o;
}

}  // namespace specserve::engine
