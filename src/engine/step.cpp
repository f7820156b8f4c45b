// The engine's step loop: Engine::step, one page of named stages, each defined below it (or in the
// file named). One step, in order:
//
//   1. sequences in      schedule_sequences  new requests queued, cancelled / timed-out ones freed,
//                                            swapped-out ones back while they fit, then queued ones
//                                            admitted while what they need now fits the KV budget
//                                            (FCFS, engine/kv_budget.h), finished ones retired
//   2. rows planned      plan_with_blocks    decode / verify rows of every decoding sequence, then
//                                            prefill chunks oldest first within the row budget, unless
//                                            the prefill hold keeps short ones for a later step
//                                            (engine/batch_plan.h); while their KV blocks do not fit,
//                                            the newest running sequence is swapped out (engine/swap.h)
//   3. rows laid out     lay_out_rows        prefill chunks, decode rows [pending], verify rows
//                                            [pending, d1..dk]; one picker per sequence
//                                            (engine/row_layout.h, engine/row_picker.h)
//   4. one forward       forward             one target forward over every row, capturing the
//                                            drafter's target layers for every row
//   5. picks, acceptance, commit             per span (pick_accept_commit): each row picked by the
//                                            sequence's picker; a draft is accepted iff it equals the
//                                            pick plain decoding makes there (engine/acceptance.h);
//                                            the target keeps pending + accepted rows (ONE
//                                            TargetModel::commit_many for every span)
//   6. drafter context   hand_over_context   ONE batched hand-off (DraftProposer::append_contexts)
//                                            of every committed row: prefill chunks, pending +
//                                            accepted drafts; never a rejected draft
//   7. tokens out        stream_tokens       the step observer, then the stop checker and the
//                                            request's stream
//   8. drafts proposed   propose_drafts      γ per sequence from the draft-length policy
//                                            (engine/draft_length_policy.h), then ONE batched propose
//                                            for the sequences with γ > 0 (none: no propose; none
//                                            while more than spec_max_batch decode)
//   9. finished retired  retire_finished     KV blocks, state and drafter context freed
//
// The ordering rule: the drafter receives a step's context rows (6) after every commit of the step
// and before any of its tokens are streamed (7), so an observer or a client that sees a token also
// sees the drafter holding the rows before it; drafts are proposed (8) after streaming, because the
// stop checker decides there which sequences finished (they are not drafted for).
#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <span>
#include <vector>

#include "core/error.h"
#include "engine/batch_plan.h"
#include "engine/row_layout.h"

namespace specserve::engine {

void Engine::step() {
  step_trace_.begin();
  if (!schedule_sequences()) return;  // 1
  step_trace_.mark(1);
  const std::vector<PlannedSpan> plan = plan_with_blocks();  // 2
  note_prefill_waits(plan);
  if (plan.empty()) return;
  step_trace_.mark(2);
  step_had_prefill_ =
      std::any_of(plan.begin(), plan.end(), [](const PlannedSpan& p) { return p.kind == SpanKind::PrefillChunk; });
  const StepRows rows = lay_out_rows(plan, running_, proposer_, options_.verify_mode);  // 3
  step_trace_.mark(3);
  const ForwardResult out = forward(rows);  // 4
  step_trace_.mark(4);
  std::vector<SpanResult> results = pick_accept_commit(rows, out);  // 5
  step_trace_.mark(5);
  hand_over_context(results, out);  // 6
  step_trace_.mark(6);
  stream_tokens(results);  // 7
  step_trace_.mark(7);
  propose_drafts();  // 8
  step_trace_.mark(8);
  retire_finished();  // 9
  step_trace_.mark(9);
  if (step_trace_.on()) {
    int64_t drafts = 0;  // proposed for the next step
    for (const auto& s : running_) drafts += static_cast<int64_t>(s->drafts.size());
    step_trace_.end(rows.total_rows(), static_cast<int64_t>(rows.spans.size()), drafts);
  }
}

// 1. Returns false when no sequence is running.
bool Engine::schedule_sequences() {
  intake();
  reap_cancelled();
  retire_finished();
  resume_swapped();
  const size_t before = running_.size();
  admit();
  note_admissions(static_cast<int64_t>(running_.size() - before));
  return !running_.empty();
}

// 2.
std::vector<PlannedSpan> Engine::plan_rows(bool* held) const {
  std::vector<SeqPlanInput> in;
  in.reserve(running_.size());
  for (const auto& s : running_) in.push_back(plan_input(*s));
  return plan_step(in, options_, arrivals_.per_step(), held);
}

// A prefilling sequence the plan left out waited one step more; every other sequence waits no longer.
void Engine::note_prefill_waits(std::span<const PlannedSpan> plan) {
  for (const auto& s : running_) s->prefill_waited = s->prefilling() ? s->prefill_waited + 1 : 0;
  for (const PlannedSpan& p : plan) running_[p.seq]->prefill_waited = 0;
}

void Engine::note_admissions(int64_t admitted) { arrivals_.note_step(admitted); }

// 4.
ForwardResult Engine::forward(const StepRows& rows) {
  ForwardResult out = model_.forward(rows.batch);
  metrics_.steps.fetch_add(1, std::memory_order_relaxed);
  metrics_.step_rows.fetch_add(static_cast<uint64_t>(rows.total_rows()), std::memory_order_relaxed);
  return out;
}

namespace {

// The `n` logits rows of one sequence from `first` on, as its picker reads them.
PickerRows picker_rows(Picker picker, const ForwardResult& out, int64_t first, int64_t n) {
  PickerRows rows;
  if (picker == Picker::DeviceArgmax) {
    SS_CHECK(first + n <= static_cast<int64_t>(out.argmax.size()), "step: argmax rows [{}, {}) of {}", first, first + n,
             out.argmax.size());
    rows.argmax = std::span<const int32_t>(out.argmax).subspan(static_cast<size_t>(first), static_cast<size_t>(n));
    return rows;
  }
  rows.vocab = out.logits.shape().ndim > 1 ? out.logits.shape()[1] : 0;
  rows.logits =
      std::span<const float>(out.logits.as<float>() + first * rows.vocab, static_cast<size_t>(n * rows.vocab));
  return rows;
}

}  // namespace

// 5. Per span, in plan order. A prefill chunk is committed by the forward; its last chunk's last row
// gives the first token (a verify with no drafts). A decode / verify span keeps pending + the
// accepted drafts; the pick at the first mismatch (or after the last draft) is the next pending token.
std::vector<Engine::SpanResult> Engine::pick_accept_commit(const StepRows& rows, const ForwardResult& out) {
  std::vector<SpanResult> results;
  results.reserve(rows.spans.size());
  std::vector<std::pair<SequenceState*, int64_t>>& commits = commits_;  // its storage reused
  commits.clear();
  int64_t next_logits_row = 0;
  for (size_t i = 0; i < rows.spans.size(); ++i) {
    const SpanRows& span = rows.spans[i];
    Sequence& s = *span.seq;
    SpanResult r;
    r.seq = &s;
    r.first_batch_row = out.span_first_row[i];
    if (span.plan.kind == SpanKind::PrefillChunk) {
      s.advance_prefill(span.plan.end);
      r.first_position = span.plan.begin;
      r.committed = span.tokens;
      if (span.plan.final_chunk) {
        metrics_.prompt_tokens.fetch_add(static_cast<uint64_t>(s.prompt_len()), std::memory_order_relaxed);
        r.picks =
            pick_rows(span.picker, s.sampler(), s.history(), {}, picker_rows(span.picker, out, next_logits_row, 1),
                      s.draft_context.get(), options_.verify_mode, workspace_);
        next_logits_row += 1;
        r.picked = true;
      }
    } else {
      const int k = static_cast<int>(s.drafts.size());
      r.picks = pick_rows(span.picker, s.sampler(), s.history(), s.drafts,
                          picker_rows(span.picker, out, next_logits_row, k + 1), s.draft_context.get(),
                          options_.verify_mode, workspace_);
      next_logits_row += 1 + k;
      r.picked = true;
      const int accepted = r.picks.accepted;
      commits.emplace_back(&s.state(), 1 + accepted);  // after the loop: every sequence's in one call
      r.first_position = s.state().length();
      r.committed = std::span<const int32_t>(span.tokens).first(static_cast<size_t>(1 + accepted));
      if (k > 0) {
        metrics_.record_spec_round(k, accepted);
        // The draft-length policy's evidence (engine/acceptance_stats.h).
        s.acceptance.observe(k, accepted, static_cast<int64_t>(metrics_.steps.load(std::memory_order_relaxed)));
        draft_policy_.engine_acceptance().observe(k, accepted);
      }
      if (s.request().on_step) r.step = SpecStep{r.first_position, s.drafts, accepted, r.picks.tokens};
      s.drafts.clear();
    }
    if (r.picked) s.pending = r.picks.tokens.back();
    results.push_back(std::move(r));
  }
  model_.commit_many(commits);
  // The blocks the forward took (and the commit kept) are in the gauges before any token of this step
  // is streamed: a reader that sees a token sees its blocks counted.
  publish_budget_gauges();
  return results;
}

// 6. The captured rows are left on the device when the proposer takes them there, else on the host.
void Engine::hand_over_context(std::span<const SpanResult> results, const ForwardResult& out) {
  TensorView captured;  // no dimensions: nothing captured
  if (out.captured_device.shape().ndim == 2)
    captured = out.captured_device.view();
  else if (out.captured.shape().ndim == 2)
    captured = out.captured.view();
  std::vector<DraftProposer::ContextRows>& context_rows = context_rows_;  // its storage reused
  context_rows.clear();
  for (const SpanResult& r : results) {
    if (!r.seq->draft_context) continue;
    const auto n = static_cast<int64_t>(r.committed.size());
    context_rows.push_back(
        {r.seq->draft_context.get(), r.first_position, r.committed,
         captured.ndim() == 2 ? captured.rows(r.first_batch_row, r.first_batch_row + n) : TensorView()});
  }
  if (!context_rows.empty()) proposer_->append_contexts(context_rows);
}

// 7. Through the stop checker (stop strings held back across tokens) to the request's stream.
void Engine::stream_tokens(std::span<const SpanResult> results) {
  for (const SpanResult& r : results) {
    if (!r.picked) continue;
    if (r.step) r.seq->request().on_step(*r.step);
    r.seq->emit(r.picks.tokens, r.picks.logprobs, token_text_, metrics_);
  }
}

// 8. For the next step's verify rows: each decoding sequence's γ from the draft-length policy
// (engine/draft_length_policy.h; under a fixed policy gamma, fewer near max_tokens); γ = 0 leaves it a
// plain decode row, and when no sequence drafts the drafter does not run. Past options_.spec_max_batch
// decoding sequences (a hard cap) the next step is a plain decode.
void Engine::propose_drafts() {
  if (!proposer_) return;
  // The step's lists reuse their storage (engine.h: no allocation on a plain step).
  std::vector<Sequence*>& decoding = decoding_;
  std::vector<int>& max_drafts = max_drafts_;
  decoding.clear();
  max_drafts.clear();
  bool can_draft = false;
  for (auto& sp : running_) {
    Sequence& s = *sp;
    if (s.finished() || s.prefilling() || !s.pending) continue;
    // Drafts past max_tokens would be cut anyway; the last token needs no drafts.
    const int m =
        s.draft_context ? static_cast<int>(std::clamp<int64_t>(s.remaining_tokens() - 1, 0, options_.gamma)) : 0;
    decoding.push_back(&s);
    max_drafts.push_back(m);
    can_draft = can_draft || m > 0;
  }
  step_prediction_.valid = step_prediction_.valid && can_draft && !speculation_paused();
  if (!can_draft) return;
  if (speculation_paused()) {
    metrics_.spec_paused_steps.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const std::span<const int> gamma = draft_lengths(decoding, max_drafts);
  std::vector<ProposeItem>& items = propose_items_;
  items.clear();
  for (size_t i = 0; i < decoding.size(); ++i) {
    if (gamma[i] <= 0) continue;
    Sequence& s = *decoding[i];
    ProposeItem item;
    item.context = s.draft_context.get();
    item.pending_token = *s.pending;
    item.pending_position = s.state().length();
    item.sampler = &s.sampler();
    item.history = &s.history();
    item.max_drafts = gamma[i];
    item.drafts = &s.drafts;
    items.push_back(item);
  }
  if (items.empty()) {
    metrics_.spec_paused_steps.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  proposer_->propose(items);
  for (const auto& item : items) {
    if (static_cast<int>(item.drafts->size()) > item.max_drafts) item.drafts->resize(item.max_drafts);
  }
}

std::span<const int> Engine::draft_lengths(std::span<Sequence* const> decoding, std::span<const int> max_drafts) {
  if (!draft_policy_.adaptive()) return max_drafts;
  const auto now = std::chrono::steady_clock::now();
  const uint64_t step_index = metrics_.steps.load(std::memory_order_relaxed);
  // The step since the last choice against its prediction (engine.h: StepPrediction).
  const StepPrediction& last = step_prediction_;
  if (options_.step_cost_feedback && last.valid && last.step + 1 == step_index && !step_had_prefill_ &&
      last.sequences == decoding.size())
    draft_policy_.observe_step(last.drafting, last.seconds, std::chrono::duration<double>(now - last.at).count());
  std::vector<PolicySequence>& sequences = policy_sequences_;
  sequences.resize(decoding.size());
  for (size_t i = 0; i < decoding.size(); ++i)
    sequences[i] = {&decoding[i]->acceptance, decoding[i]->state().length(), max_drafts[i]};
  const StepDraftChoice choice = draft_policy_.choose_step(static_cast<int64_t>(step_index), sequences);
  step_prediction_ = {true, now, choice.model_seconds, choice.drafted > 0, step_index, decoding.size()};
  metrics_.spec_policy_drafted.fetch_add(choice.drafted, std::memory_order_relaxed);
  metrics_.spec_policy_plain.fetch_add(choice.plain, std::memory_order_relaxed);
  metrics_.spec_policy_probes.fetch_add(choice.probes, std::memory_order_relaxed);
  if (choice.plain_check) metrics_.spec_policy_plain_checks.fetch_add(1, std::memory_order_relaxed);
  const StepCostCorrection& correction = draft_policy_.correction();
  step_trace_.policy(choice.model_seconds, correction.plain, correction.drafting);
  metrics_.spec_policy_correction_plain.store(correction.plain, std::memory_order_relaxed);
  metrics_.spec_policy_correction_drafting.store(correction.drafting, std::memory_order_relaxed);
  return choice.gamma;
}

bool Engine::speculation_paused() const {
  if (options_.spec_max_batch <= 0) return false;
  int decoding = 0;
  for (const auto& sp : running_)
    if (!sp->finished() && !sp->prefilling() && sp->pending) ++decoding;
  return decoding > options_.spec_max_batch;
}

}  // namespace specserve::engine
