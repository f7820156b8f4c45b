#include "engine/engine.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/log.h"
#include "engine/acceptance.h"
#include "engine/batch_plan.h"

namespace specserve::engine {

Engine::Engine(TargetModel& model, EngineOptions options, TokenText token_text, DraftProposer* proposer)
    : model_(model),
      options_(normalised(options)),
      token_text_(std::move(token_text)),
      proposer_(proposer),
      vocab_{model.vocab_size(), options.real_vocab},
      budget_(options_.kv_blocks, options_.max_seqs) {
  if (proposer_) options_.gamma = proposer_->gamma();
  options_ = normalised(options_);
  SS_CHECK(options_.kv_blocks > 0, "engine: the KV budget is empty (kv_blocks = {})", options_.kv_blocks);
  metrics_.kv_blocks_total.store(options_.kv_blocks);
  thread_ = std::thread([this] { run(); });
}

Engine::~Engine() { shutdown(std::chrono::milliseconds(0)); }

int64_t Engine::max_sequence_tokens() const {
  int64_t limit = options_.kv_blocks * kKvBlockSize;
  if (model_.config().max_position_embeddings > 0) limit = std::min(limit, model_.config().max_position_embeddings);
  return limit - (proposer_ ? options_.gamma + 1 : 0);
}

std::shared_ptr<ResultStream> Engine::submit(GenerationRequest request) {
  SS_CHECK(!request.prompt.empty(), "the prompt is empty");
  for (int32_t t : request.prompt) {
    SS_CHECK(t >= 0 && t < vocab_.real(), "prompt token id {} is out of range [0, {})", t, vocab_.real());
  }
  const int64_t max_total = max_sequence_tokens();
  auto& stop = request.params.stop;
  const int64_t prompt = static_cast<int64_t>(request.prompt.size());
  if (!stop.max_tokens) stop.max_tokens = max_total - prompt;
  SS_CHECK(prompt + *stop.max_tokens <= max_total,
           "prompt ({} tokens) + max_tokens ({}) exceeds the {} tokens a sequence may hold", prompt, *stop.max_tokens,
           max_total);
  Queued q;
  q.request = std::move(request);
  // The Sampler validates every parameter (Error naming the field) and fixes the seed.
  q.sampler = std::make_shared<const sampling::Sampler>(q.request.params, vocab_);
  q.positions = prompt + *stop.max_tokens + (proposer_ && q.request.speculate ? options_.gamma + 1 : 0);
  q.stream = std::make_shared<ResultStream>();
  {
    std::lock_guard lock(mutex_);
    if (stopping_) throw QueueFull("the server is shutting down");
    const int64_t waiting = metrics_.requests_waiting.load();
    if (waiting >= options_.max_queue) {
      metrics_.requests_rejected.fetch_add(1);
      throw QueueFull(fmt::format("the server is busy ({} requests are waiting)", waiting));
    }
    q.id = next_id_++;
    metrics_.requests_received.fetch_add(1);
    metrics_.requests_waiting.fetch_add(1);
    q.stream->set_cancel_hook([this] { wake_.notify_all(); });
    auto stream = q.stream;
    submitted_.push_back(std::move(q));
    wake_.notify_all();
    return stream;
  }
}

void Engine::shutdown(std::chrono::milliseconds grace) {
  {
    std::lock_guard lock(mutex_);
    if (!thread_.joinable()) return;
    stopping_ = true;
    wake_.notify_all();
  }
  // Let the scheduler drain: it exits once nothing is queued or running.
  const auto deadline = Clock::now() + grace;
  {
    std::unique_lock lock(mutex_);
    exit_ = true;
    wake_.notify_all();
    while (thread_.joinable() && Clock::now() < deadline &&
           (metrics_.requests_running.load() > 0 || metrics_.requests_waiting.load() > 0)) {
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      lock.lock();
    }
    cancel_all_ = true;
    wake_.notify_all();
  }
  thread_.join();
}

void Engine::run() {
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      // Sleep while idle; a submission, a cancellation or shutdown wakes us.
      wake_.wait(lock, [&] { return !submitted_.empty() || !running_.empty() || !waiting_.empty() || exit_; });
      if (exit_ && submitted_.empty() && running_.empty() && waiting_.empty()) return;
      if (cancel_all_) {
        lock.unlock();
        intake();
        for (auto& q : waiting_) finish_queued(q, FinishReason::Cancelled, "");
        waiting_.clear();
        for (auto& s : running_) s->finish(FinishReason::Cancelled, "", metrics_);
        retire_finished();
        continue;
      }
    }
    try {
      step();
    } catch (const std::exception& e) {
      // A model or sampler failure must not take the server down: fail the running requests,
      // free them, and keep serving.
      SS_LOG_ERROR("engine", "step failed: {}", e.what());
      fail_all(e.what());
    }
  }
}

// ---------------------------------------------------------------------------------------------
// One engine step (docs/DESIGN.md §2). Every arrow of the data flow is one numbered block below.
// ---------------------------------------------------------------------------------------------
void Engine::step() {
  // 1. Requests in: new submissions join the FCFS queue; cancelled or timed-out requests free
  //    their KV blocks, state and drafter context now; queued requests are admitted while their
  //    worst case fits the KV/state budget.
  intake();
  reap_cancelled();
  admit();
  retire_finished();
  if (running_.empty()) return;

  // 2. The scheduler picks rows: decode / verify rows of every decoding sequence, then prefill
  //    chunks oldest first within the row budget.
  std::vector<SeqPlanInput> plan_in;
  plan_in.reserve(running_.size());
  for (const auto& s : running_) {
    plan_in.push_back({s->prompt_len(), s->prefilled(), static_cast<int>(s->drafts.size())});
  }
  const std::vector<PlannedSpan> plan = plan_step(plan_in, options_);
  if (plan.empty()) return;

  // 3. Rows are laid out: prefill chunks (committed at once), decode rows [pending] and verify
  //    rows [pending, d1..dγ] (extend: kept or rolled back by commit below).
  ForwardBatch batch;
  if (proposer_) {
    batch.capture_layers = proposer_->capture_layers();
    batch.capture_on_device = proposer_->wants_device_features();
  }
  std::vector<std::vector<int32_t>> inputs(plan.size());
  for (size_t i = 0; i < plan.size(); ++i) {
    Sequence& s = *running_[plan[i].seq];
    SequenceSpan span;
    span.state = &s.state();
    if (plan[i].kind == SpanKind::PrefillChunk) {
      inputs[i].assign(s.request().prompt.begin() + plan[i].begin, s.request().prompt.begin() + plan[i].end);
      span.mode = SpanMode::Prefill;
      span.logits = plan[i].final_chunk ? LogitsWanted::Last : LogitsWanted::None;
    } else {
      inputs[i].push_back(*s.pending);
      inputs[i].insert(inputs[i].end(), s.drafts.begin(), s.drafts.end());
      span.mode = SpanMode::Extend;
      span.logits = LogitsWanted::All;
    }
    span.tokens = inputs[i];
    if (picks_on_backend(s)) span.argmax_columns = s.sampler().vocab().real();
    batch.spans.push_back(span);
  }

  // 4. One target forward over all rows (capturing the drafter's target layers for every row).
  ForwardResult out = model_.forward(batch);
  metrics_.steps.fetch_add(1, std::memory_order_relaxed);
  int64_t rows = 0;
  for (const auto& p : plan) rows += p.rows;
  metrics_.step_rows.fetch_add(static_cast<uint64_t>(rows), std::memory_order_relaxed);

  const int64_t vocab = out.logits.shape().ndim > 1 ? out.logits.shape()[1] : 0;
  // The captured rows: left on the device when the proposer takes them there, else on the host.
  TensorView captured;  // no dimensions: nothing captured
  if (out.captured_device.shape().ndim == 2)
    captured = out.captured_device.view();
  else if (out.captured.shape().ndim == 2)
    captured = out.captured.view();
  auto logits_row = [&](int64_t r) {
    return std::span<const float>(out.logits.as<float>() + r * vocab, static_cast<size_t>(vocab));
  };
  auto features = [&](int64_t first_row, int64_t n) {
    return captured.ndim() == 2 ? captured.rows(first_row, first_row + n) : TensorView();
  };

  int64_t next_logits_row = 0;
  // The drafter contexts' new rows (prefilled or committed), handed over together after the loop.
  std::vector<DraftProposer::ContextRows> context_rows;
  // Each sequence's step record and tokens, passed on once the drafter holds those rows too (the step
  // observer, request.h, then the stream, whose last event may end the request).
  struct StepOut {
    Sequence* seq;
    std::optional<SpecStep> step;
    std::vector<int32_t> picked;
    std::vector<std::optional<sampling::Logprobs>> logprobs;
  };
  std::vector<StepOut> outs;
  for (size_t i = 0; i < plan.size(); ++i) {
    Sequence& s = *running_[plan[i].seq];
    const int64_t first_row = out.span_first_row[i];
    std::vector<int32_t> picked;
    std::vector<std::optional<sampling::Logprobs>> logprobs;
    std::optional<SpecStep> step;

    if (plan[i].kind == SpanKind::PrefillChunk) {
      s.advance_prefill(plan[i].end);
      if (s.draft_context) {
        context_rows.push_back({s.draft_context.get(), plan[i].begin, inputs[i], features(first_row, plan[i].rows)});
      }
      if (!plan[i].final_chunk) continue;
      metrics_.prompt_tokens.fetch_add(static_cast<uint64_t>(s.prompt_len()), std::memory_order_relaxed);
      // 5. Per-row pick: the first token, from the prompt's last row.
      sampling::Pick p = batch.spans[i].argmax_columns > 0
                             ? sampling::Pick{sampling::backend_argmax_pick(out.argmax[next_logits_row++]), std::nullopt}
                             : s.sampler().pick(logits_row(next_logits_row++), s.history(), workspace_);
      s.history().push(p.token);
      picked.push_back(p.token);
      logprobs.push_back(std::move(p.logprobs));
    } else {
      // 5. Per-row picks through the full sampling pipeline, and 6. acceptance: a draft is
      //    accepted iff it equals the pick plain decoding makes at that position (docs/DESIGN.md §1.4;
      //    the other modes in acceptance.h). The pick at the first mismatch (or after the last
      //    draft) is the next pending token.
      const int k = static_cast<int>(s.drafts.size());
      const int64_t verify_row = next_logits_row;
      Verdict verdict =
          batch.spans[i].argmax_columns > 0
              ? verify_drafts_by_argmax(s.history(), s.drafts,
                                        std::span<const int32_t>(out.argmax).subspan(verify_row, k + 1))
              : verify_drafts(s.sampler(), s.history(), s.drafts, [&](int r) { return logits_row(verify_row + r); },
                              s.draft_context.get(), options_.verify_mode, workspace_);
      const int accepted = verdict.accepted;
      picked = std::move(verdict.tokens);
      logprobs = std::move(verdict.logprobs);
      next_logits_row += 1 + k;
      // 7. Commit: the target keeps the rows of pending + accepted drafts; the drafter context
      //    gets exactly those rows.
      model_.commit(s.state(), 1 + accepted);
      if (s.draft_context) {
        context_rows.push_back({s.draft_context.get(), s.state().length() - (1 + accepted),
                                std::span<const int32_t>(inputs[i]).first(1 + accepted),
                                features(first_row, 1 + accepted)});
      }
      if (k > 0) metrics_.record_spec_round(k, accepted);
      if (s.request().on_step) step = SpecStep{s.state().length() - (1 + accepted), s.drafts, accepted, picked};
      s.drafts.clear();
    }
    s.pending = picked.back();
    outs.push_back({&s, std::move(step), std::move(picked), std::move(logprobs)});
  }

  if (!context_rows.empty()) proposer_->append_contexts(context_rows);
  for (StepOut& o : outs) {
    if (o.step) o.seq->request().on_step(*o.step);
    // 8. Tokens out: through the stop checker (stop strings held back across tokens) to the
    //    request's stream.
    o.seq->emit(o.picked, o.logprobs, token_text_, metrics_);
  }

  // 9. One batched drafter propose for every speculating sequence, for the next step's verify —
  //    unless more sequences decode than options_.spec_max_batch: then the next step is a plain decode.
  if (proposer_ && speculation_paused()) {
    metrics_.spec_paused_steps.fetch_add(1, std::memory_order_relaxed);
  } else if (proposer_) {
    std::vector<ProposeItem> items;
    for (auto& sp : running_) {
      Sequence& s = *sp;
      if (s.finished() || s.prefilling() || !s.draft_context || !s.pending) continue;
      // Drafts past max_tokens would be cut anyway; the last token needs no drafts.
      const int max_drafts = static_cast<int>(std::min<int64_t>(options_.gamma, s.remaining_tokens() - 1));
      if (max_drafts <= 0) continue;
      ProposeItem item;
      item.context = s.draft_context.get();
      item.pending_token = *s.pending;
      item.pending_position = s.state().length();
      item.sampler = &s.sampler();
      item.history = &s.history();
      item.max_drafts = max_drafts;
      item.drafts = &s.drafts;
      items.push_back(item);
    }
    if (!items.empty()) proposer_->propose(items);
    for (const auto& item : items) {
      if (static_cast<int>(item.drafts->size()) > item.max_drafts) item.drafts->resize(item.max_drafts);
    }
  }
  retire_finished();
}

bool Engine::speculation_paused() const {
  if (options_.spec_max_batch <= 0) return false;
  int decoding = 0;
  for (const auto& sp : running_)
    if (!sp->finished() && !sp->prefilling() && sp->pending) ++decoding;
  return decoding > options_.spec_max_batch;
}

bool Engine::picks_on_backend(const Sequence& s) const {
  if (!s.sampler().picks_raw_argmax()) return false;
  if (s.drafts.empty()) return true;
  const bool sampled_drafts = s.draft_context && !s.draft_context->draft_distribution(0).empty();
  return options_.verify_mode == VerifyMode::SampleMatch && !sampled_drafts;
}

void Engine::intake() {
  std::lock_guard lock(mutex_);
  while (!submitted_.empty()) {
    waiting_.push_back(std::move(submitted_.front()));
    submitted_.pop_front();
  }
}

void Engine::finish_queued(Queued& q, FinishReason reason, const std::string& error) {
  StreamEvent ev;
  ev.finished = true;
  ev.finish_reason = reason;
  ev.error = error;
  ev.usage = {static_cast<int64_t>(q.request.prompt.size()), 0};
  q.stream->push(std::move(ev));
  metrics_.requests_finished[static_cast<int>(reason)].fetch_add(1);
  metrics_.requests_waiting.fetch_sub(1);
}

void Engine::reap_cancelled() {
  const auto now = Clock::now();
  auto expired = [&](const GenerationRequest& r) { return r.deadline && now >= *r.deadline; };
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (it->stream->cancelled() || expired(it->request)) {
      finish_queued(*it, FinishReason::Cancelled, "");
      it = waiting_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& s : running_) {
    if (!s->finished() && (s->stream().cancelled() || expired(s->request()))) {
      s->finish(FinishReason::Cancelled, "", metrics_);
    }
  }
}

void Engine::admit() {
  // FCFS: the head waits until it fits, so a large request is not starved by small ones.
  while (!waiting_.empty() && budget_.try_reserve(waiting_.front().positions)) {
    Queued q = std::move(waiting_.front());
    waiting_.pop_front();
    metrics_.requests_waiting.fetch_sub(1);
    auto seq = std::make_unique<Sequence>(q.id, std::move(q.request), std::move(q.stream), std::move(q.sampler),
                                          model_.new_sequence(), q.positions);
    if (proposer_ && seq->request().speculate) seq->draft_context = proposer_->new_context();
    running_.push_back(std::move(seq));
    metrics_.requests_running.fetch_add(1);
  }
  metrics_.kv_blocks_used.store(budget_.reserved_blocks());
}

void Engine::retire_finished() {
  // Destroying a Sequence returns its KV blocks to the pool and drops its DeltaNet state and
  // drafter context; the budget reservation goes with it.
  auto it = std::remove_if(running_.begin(), running_.end(), [&](std::unique_ptr<Sequence>& s) {
    if (!s->finished()) return false;
    const int64_t reserved = s->reserved_positions();
    s.reset();  // frees KV blocks, state and drafter context now
    budget_.release(reserved);
    // Gauges are updated before the running count drops, so a reader that sees the request gone
    // also sees its blocks released.
    metrics_.kv_blocks_used.store(budget_.reserved_blocks());
    metrics_.requests_running.fetch_sub(1);
    return true;
  });
  running_.erase(it, running_.end());
  metrics_.kv_blocks_used.store(budget_.reserved_blocks());
}

void Engine::fail_all(const std::string& error) {
  for (auto& s : running_) s->finish(FinishReason::Error, error, metrics_);
  retire_finished();
}

}  // namespace specserve::engine
