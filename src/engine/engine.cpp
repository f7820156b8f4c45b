#include "engine/engine.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/log.h"

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

// Engine::step and its stages: engine/step.cpp.

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
