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

bool hold_prefill(std::span<const SeqPlanInput> seqs, std::span<const PlannedSpan> plan, int hold_steps,
                  int64_t hold_rows, double arrivals) {
  if (hold_steps <= 0) return false;
  bool decoding = false;
  int64_t rows = 0, waited = 0;
  for (const PlannedSpan& s : plan) {
    if (s.kind == SpanKind::Decode) {
      decoding = true;
      continue;
    }
    rows += s.rows;
    waited = std::max(waited, seqs[s.seq].waited);
  }
  if (!decoding || rows == 0 || rows >= hold_rows || waited >= hold_steps) return false;
  return arrivals * static_cast<double>(hold_steps - waited) >= 1.0;
}

std::vector<PlannedSpan> plan_step(std::span<const SeqPlanInput> seqs, const EngineOptions& o, double arrivals,
                                   bool* held) {
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
  const bool hold = hold_prefill(seqs, plan, o.prefill_hold_steps, o.prefill_hold_rows, arrivals);
  if (hold) std::erase_if(plan, [](const PlannedSpan& s) { return s.kind == SpanKind::PrefillChunk; });
  if (held) *held = hold;
  return plan;
}

}  // namespace specserve::engine
