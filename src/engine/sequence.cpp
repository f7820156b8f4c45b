#include "engine/sequence.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "core/error.h"

namespace specserve::engine {

namespace {
double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }
}  // namespace

Sequence::Sequence(uint64_t id, GenerationRequest request, std::shared_ptr<ResultStream> stream,
                   std::shared_ptr<const sampling::Sampler> sampler, std::unique_ptr<SequenceState> state,
                   int64_t worst_positions)
    : id_(id),
      request_(std::move(request)),
      stream_(std::move(stream)),
      sampler_(std::move(sampler)),
      state_(std::move(state)),
      history_(sampler_->make_state(request_.prompt)),
      stop_(sampler_->stop_params()),
      worst_positions_(worst_positions) {}

int64_t Sequence::remaining_tokens() const {
  const auto& mt = sampler_->stop_params().max_tokens;
  return mt ? *mt - static_cast<int64_t>(stop_.generated()) : INT64_MAX;
}

int64_t Sequence::kv_blocks() const {
  return std::max(state_->private_blocks(), draft_context ? draft_context->kv_blocks() : int64_t{0});
}

size_t Sequence::swap_bytes() const { return state_->swap_bytes() + (draft_context ? draft_context->swap_bytes() : 0); }

size_t Sequence::swap_out() {
  SS_CHECK(!swapped_out(), "sequence {}: swapped out twice", id_);
  const size_t bytes = swap_bytes();
  state_->swap_out();
  if (draft_context) {
    try {
      draft_context->swap_out();
    } catch (...) {
      state_->swap_in();  // all or nothing
      throw;
    }
  }
  prefix.reset();  // the image holds the shared blocks' bytes too
  swapped_bytes_ = bytes;
  swapped_ = true;
  return bytes;
}

size_t Sequence::swap_in() {
  SS_CHECK(swapped_out(), "sequence {}: swapped in while not swapped out", id_);
  state_->swap_in();
  if (draft_context) draft_context->swap_in();
  swapped_ = false;
  return std::exchange(swapped_bytes_, 0);
}

bool Sequence::emit(std::span<const int32_t> tokens, const std::vector<std::optional<sampling::Logprobs>>& logprobs,
                    const TokenText& token_text, EngineMetrics& metrics) {
  std::vector<std::string> pieces;
  pieces.reserve(tokens.size());
  for (int32_t t : tokens) pieces.push_back(token_text(t));
  sampling::StopStep step = stop_.consume(tokens, pieces);

  StreamEvent ev;
  ev.tokens.assign(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(step.tokens_kept));
  ev.text = std::move(step.text);
  // Logprobs for the kept tokens, except a stop token that ends the output (it has no text).
  size_t with_text = step.tokens_kept - (step.stop_token ? 1 : 0);
  for (size_t i = 0; i < with_text && i < logprobs.size(); ++i) {
    if (!logprobs[i]) continue;
    TokenLogprob lp{tokens[i], logprobs[i]->chosen, {}};
    for (const auto& t : logprobs[i]->top) lp.top.push_back({t.id, t.logprob});
    ev.logprobs.push_back(std::move(lp));
  }
  kept_tokens_ += static_cast<int64_t>(step.tokens_kept);
  metrics.generation_tokens.fetch_add(step.tokens_kept, std::memory_order_relaxed);

  const auto now = Clock::now();
  if (step.tokens_kept > 0) {
    if (!last_emit_) {
      metrics.time_to_first_token.observe(seconds(now - request_.arrival));
    } else {
      const double gap = seconds(now - *last_emit_) / static_cast<double>(step.tokens_kept);
      for (size_t i = 0; i < step.tokens_kept; ++i) metrics.inter_token_latency.observe(gap);
    }
    last_emit_ = now;
  }
  if (step.finished()) {
    ev.finished = true;
    ev.finish_reason = step.reason == sampling::FinishReason::kLength ? FinishReason::Length : FinishReason::Stop;
    ev.usage = {prompt_len(), kept_tokens_, cached_tokens};
    finished_ = true;
    record_finish(ev.finish_reason, metrics);
  }
  if (!ev.tokens.empty() || ev.finished) stream_->push(std::move(ev));
  return finished_;
}

void Sequence::finish(FinishReason reason, const std::string& error, EngineMetrics& metrics) {
  if (finished_) return;
  finished_ = true;
  failed_ = reason == FinishReason::Error;
  StreamEvent ev;
  ev.finished = true;
  ev.finish_reason = reason;
  ev.error = error;
  ev.usage = {prompt_len(), kept_tokens_, cached_tokens};
  stream_->push(std::move(ev));
  record_finish(reason, metrics);
}

void Sequence::record_finish(FinishReason reason, EngineMetrics& metrics) {
  metrics.requests_finished[static_cast<int>(reason)].fetch_add(1, std::memory_order_relaxed);
  metrics.request_latency.observe(seconds(Clock::now() - request_.arrival));
}

}  // namespace specserve::engine
