#include "engine/row_layout.h"

namespace specserve::engine {

namespace {

// The picker for `s` this step: its drafts (if any) are judged as they were proposed.
Picker picker_for(const Sequence& s, VerifyMode verify_mode) {
  const bool sampled_drafts = s.draft_context && !s.draft_context->draft_distribution(0).empty();
  return choose_picker(s.sampler(), !s.drafts.empty(), sampled_drafts, verify_mode);
}

}  // namespace

int64_t StepRows::total_rows() const {
  int64_t rows = 0;
  for (const SpanRows& s : spans) rows += s.plan.rows;
  return rows;
}

StepRows lay_out_rows(std::span<const PlannedSpan> plan, std::span<const std::unique_ptr<Sequence>> running,
                      const DraftProposer* proposer, VerifyMode verify_mode) {
  StepRows out;
  if (proposer) {
    out.batch.capture_layers = proposer->capture_layers();
    out.batch.capture_on_device = proposer->wants_device_features();
  }
  out.spans.reserve(plan.size());
  for (const PlannedSpan& p : plan) {
    SpanRows rows;
    rows.seq = running[p.seq].get();
    rows.plan = p;
    const Sequence& s = *rows.seq;
    if (p.kind == SpanKind::PrefillChunk) {
      rows.tokens.assign(s.request().prompt.begin() + p.begin, s.request().prompt.begin() + p.end);
    } else {
      rows.tokens.push_back(*s.pending);
      rows.tokens.insert(rows.tokens.end(), s.drafts.begin(), s.drafts.end());
    }
    rows.picker = picker_for(s, verify_mode);
    out.spans.push_back(std::move(rows));
  }
  // The batch views the token vectors: built once they are all in place.
  for (SpanRows& rows : out.spans) {
    SequenceSpan span;
    span.state = &rows.seq->state();
    span.tokens = rows.tokens;
    if (rows.plan.kind == SpanKind::PrefillChunk) {
      span.mode = SpanMode::Prefill;
      span.logits = rows.plan.final_chunk ? LogitsWanted::Last : LogitsWanted::None;
    } else {
      span.mode = SpanMode::Extend;
      span.logits = LogitsWanted::All;
    }
    span.argmax_columns = argmax_columns(rows.picker, rows.seq->sampler());
    out.batch.spans.push_back(span);
  }
  return out;
}

}  // namespace specserve::engine
