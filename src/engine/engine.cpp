#include "engine/engine.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/log.h"
#include "engine/kv_budget.h"

namespace specserve::engine {

Engine::Engine(TargetModel& model, EngineOptions options, TokenText token_text, DraftProposer* proposer)
    : model_(model),
      options_(normalised(options)),
      token_text_(std::move(token_text)),
      proposer_(proposer),
      vocab_{model.vocab_size(), options.real_vocab} {
  if (proposer_) options_.gamma = proposer_->gamma();
  options_ = normalised(options_);
  SS_CHECK(options_.kv_blocks > 0, "engine: the KV budget is empty (kv_blocks = {})", options_.kv_blocks);
  lookahead_ = proposer_ ? proposer_->positions_past_context() : 0;
  {
    // The target's swap image is linear in its blocks: measured once on an empty sequence.
    const auto probe = model_.new_sequence();
    target_swap_fixed_ = probe->swap_bytes(0);
    target_swap_per_block_ = probe->swap_bytes(kKvBlockSize) - target_swap_fixed_;
  }
  if (options_.prefix_cache && model_.kv_pool()) {
    cache_ = std::make_unique<PrefixCache>(model_.kv_pool(), proposer_ ? proposer_->kv_pool() : nullptr);
    snapshot_blocks_ = model_.snapshot_blocks();
  }
  if (!cache_) {
    SS_LOG_INFO("engine", "prefix cache: off");
  } else if (snapshot_blocks_ > 0) {
    SS_LOG_INFO("engine",
                "prefix cache: on; DeltaNet state kept every {} prompt positions (--prefix-cache-state-interval) "
                "and at each prompt's last multiple of 64 from 256 on, {:.1f} MiB = {} KV blocks each",
                options_.prefix_cache_state_interval, static_cast<double>(model_.snapshot_bytes()) / (1 << 20),
                snapshot_blocks_);
  } else {
    SS_LOG_INFO("engine", "prefix cache: on (16-token blocks)");
  }
  metrics_.kv_blocks_total.store(options_.kv_blocks);
  metrics_.swap_space_total_bytes.store(static_cast<int64_t>(options_.swap_space_bytes));
  thread_ = std::thread([this] { run(); });
}

Engine::~Engine() { shutdown(std::chrono::milliseconds(0)); }

int64_t Engine::max_sequence_tokens() const {
  int64_t limit = options_.kv_blocks * kKvBlockSize;
  if (model_.config().max_position_embeddings > 0) limit = std::min(limit, model_.config().max_position_embeddings);
  return limit - lookahead_;
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
  q.worst_positions = prompt + *stop.max_tokens + (proposer_ && q.request.speculate ? lookahead_ : 0);
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
      wake_.wait(lock, [&] {
        return !submitted_.empty() || !running_.empty() || !swapped_.empty() || !waiting_.empty() || exit_;
      });
      if (exit_ && submitted_.empty() && running_.empty() && swapped_.empty() && waiting_.empty()) return;
      if (cancel_all_) {
        lock.unlock();
        intake();
        for (auto& q : waiting_) finish_queued(q, FinishReason::Cancelled, "");
        waiting_.clear();
        for (auto& s : running_) s->finish(FinishReason::Cancelled, "", metrics_);
        for (auto& s : swapped_) s->finish(FinishReason::Cancelled, "", metrics_);
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
  for (auto* list : {&running_, &swapped_}) {
    for (auto& s : *list) {
      if (!s->finished() && (s->stream().cancelled() || expired(s->request()))) {
        s->finish(FinishReason::Cancelled, "", metrics_);
      }
    }
  }
}

void Engine::admit() {
  // What the running sequences computed since the last step goes into the prefix cache first, so the
  // requests admitted now can use it (engine/prefix_share.cpp).
  for (auto& s : running_) publish_prefix(*s);
  // FCFS: the head waits until it fits, so a large request is not starved by small ones; and nothing
  // is admitted while a preempted sequence waits to come back (it was admitted earlier).
  while (swapped_.empty() && !waiting_.empty() && static_cast<int>(running_.size()) < options_.max_seqs) {
    Queued& q = waiting_.front();
    const bool drafts = proposer_ && q.request.speculate;
    // The swap space must be able to take it (or whatever it makes preemptible) at its longest.
    const size_t worst_swap = worst_swap_bytes(q.worst_positions, drafts);
    if (swap_reservation_with(blocks_for(q.worst_positions), worst_swap) > options_.swap_space_bytes) break;
    // Its prefix-cache hit, held (so that making room cannot evict it); then what it needs now: the
    // blocks of its first prefill chunk past the hit (and the drafter's lookahead), and a headroom for
    // the running sequences' next blocks (engine/kv_budget.h), after evicting unheld cached blocks. A
    // hit whose DeltaNet snapshot was evicted meanwhile is looked up again.
    std::vector<PrefixEntryId> hit;
    bool fits = false;
    for (;;) {
      hit = find_prefix_hit(q.request.prompt, drafts);
      if (cache_) cache_->acquire(hit);
      SeqPlanInput in =
          plan_input(static_cast<int64_t>(q.request.prompt.size()), static_cast<int64_t>(hit.size()) * kKvBlockSize, 0);
      in.branch_stop = branch_stop(q.request.prompt, in.prefilled);
      const int64_t need = blocks_for(prefill_chunk_end(in, options_.prefill_chunk) + (drafts ? lookahead_ : 0)) -
                           static_cast<int64_t>(hit.size());
      fits = make_room(need + admission_headroom(running_.size()));
      if (!fits || hit.empty() || snapshot_blocks_ == 0 || !cache_->snapshot(hit.back()).empty()) break;
      cache_->release(hit);
    }
    if (!fits) {
      if (cache_) cache_->release(hit);
      break;
    }
    Queued taken = std::move(waiting_.front());
    waiting_.pop_front();
    metrics_.requests_waiting.fetch_sub(1);
    auto seq = std::make_unique<Sequence>(taken.id, std::move(taken.request), std::move(taken.stream),
                                          std::move(taken.sampler), model_.new_sequence(), taken.worst_positions);
    seq->worst_swap_bytes = worst_swap;
    if (drafts) seq->draft_context = proposer_->new_context();
    if (cache_) {
      seq->prefix.bind(cache_.get());
      start_from_prefix(*seq, hit);
      seq->branch_stop = branch_stop(seq->request().prompt, seq->prefilled());
      metrics_.prefix_cache_queries.fetch_add(seq->prompt_len(), std::memory_order_relaxed);
      metrics_.prefix_cache_hits.fetch_add(seq->cached_tokens, std::memory_order_relaxed);
    }
    running_.push_back(std::move(seq));
    metrics_.requests_running.fetch_add(1);
  }
  publish_budget_gauges();
}

void Engine::retire_finished() {
  // Destroying a Sequence returns its KV blocks to the pools and drops its DeltaNet state and drafter
  // context (or, swapped out, its host image).
  for (auto* list : {&running_, &swapped_}) {
    auto it = std::remove_if(list->begin(), list->end(), [&](std::unique_ptr<Sequence>& s) {
      if (!s->finished()) return false;
      publish_prefix(*s);  // its prompt stays cached (engine/prefix_share.cpp)
      if (s->swapped_out()) {
        swap_used_ -= s->swapped_bytes();
        metrics_.requests_swapped.fetch_sub(1);
      }
      s.reset();  // frees KV blocks, state and drafter context now
      // Gauges are updated before the running count drops, so a reader that sees the request gone
      // also sees its blocks released.
      publish_budget_gauges();
      metrics_.requests_running.fetch_sub(1);
      return true;
    });
    list->erase(it, list->end());
  }
  publish_budget_gauges();
}

void Engine::fail_all(const std::string& error) {
  // Swapped-out sequences were not in the failed step: they stay.
  for (auto& s : running_) s->finish(FinishReason::Error, error, metrics_);
  retire_finished();
}

}  // namespace specserve::engine
