#include "engine/batch_plan.h"

#include <algorithm>

namespace specserve::engine {

int64_t prefill_chunk_end(const SeqPlanInput& q, int64_t chunk) {
  int64_t end = std::min<int64_t>(q.prompt_len, (q.prefilled / chunk + 1) * chunk);
  if (q.stop_interval > 0) end = std::min(end, (q.prefilled / q.stop_interval + 1) * q.stop_interval);
  if (q.last_stop > q.prefilled) end = std::min(end, q.last_stop);
  if (q.branch_stop > q.prefilled) end = std::min(end, q.branch_stop);
  return end;
}

std::vector<PlannedSpan> plan_step(std::span<const SeqPlanInput> seqs, const EngineOptions& o) {
  std::vector<PlannedSpan> plan;
  int64_t rows = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    if (seqs[i].prefilled < seqs[i].prompt_len) continue;
    PlannedSpan s;
    s.seq = i;
    s.kind = SpanKind::Decode;
    s.rows = 1 + seqs[i].drafts;
    rows += s.rows;
    plan.push_back(s);
  }
  for (size_t i = 0; i < seqs.size(); ++i) {
    const SeqPlanInput& q = seqs[i];
    if (q.prefilled >= q.prompt_len) continue;
    const int64_t end = prefill_chunk_end(q, o.prefill_chunk);
    const int64_t len = end - q.prefilled;
    if (rows + len > o.max_batch_rows) break;  // oldest first: later prompts do not overtake
    PlannedSpan s;
    s.seq = i;
    s.kind = SpanKind::PrefillChunk;
    s.begin = q.prefilled;
    s.end = end;
    s.final_chunk = end == q.prompt_len;
    s.rows = len;
    rows += len;
    plan.push_back(s);
  }
  return plan;
}

}  // namespace specserve::engine
