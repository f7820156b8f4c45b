#include "engine/batch_plan.h"

#include <algorithm>

namespace specserve::engine {

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
    const int64_t end = std::min<int64_t>(q.prefilled + o.prefill_chunk, q.prompt_len);
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
