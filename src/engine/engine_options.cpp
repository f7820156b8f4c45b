#include "engine/engine_options.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace specserve::engine {

std::string_view draft_policy_name(DraftPolicy p) { return p == DraftPolicy::Adaptive ? "adaptive" : "fixed"; }

DraftPolicy parse_draft_policy(std::string_view name) {
  if (name == "fixed") return DraftPolicy::Fixed;
  if (name == "adaptive") return DraftPolicy::Adaptive;
  fail("unknown draft policy '{}' (fixed or adaptive)", std::string(name));
}

EngineOptions normalised(EngineOptions o) {
  o.max_seqs = std::max(1, o.max_seqs);
  o.max_queue = std::max(0, o.max_queue);
  o.gamma = std::max(0, o.gamma);
  o.spec_max_batch = std::max(0, o.spec_max_batch);
  SS_CHECK(o.draft_policy != DraftPolicy::Adaptive || o.step_costs,
           "the adaptive draft policy needs a step cost model (calibrated or from a profile)");
  if (o.step_costs) check_step_costs(*o.step_costs);
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
