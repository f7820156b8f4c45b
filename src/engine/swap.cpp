// Preemption by swap (engine/swap.h) and the KV budget's arithmetic (engine/kv_budget.h): the Engine
// member functions behind them.
#include <algorithm>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "engine/engine.h"
#include "engine/kv_budget.h"
#include "engine/swap.h"

namespace specserve::engine {

namespace {
// Keeps `list` in admission (id) order.
void insert_in_admission_order(std::vector<std::unique_ptr<Sequence>>& list, std::unique_ptr<Sequence> s) {
  auto at = std::upper_bound(list.begin(), list.end(), s->id(),
                             [](uint64_t id, const std::unique_ptr<Sequence>& o) { return id < o->id(); });
  list.insert(at, std::move(s));
}
}  // namespace

int64_t Engine::blocks_private() const {
  int64_t n = 0;
  for (const auto& s : running_)
    if (s) n += s->kv_blocks();  // (null: mid-retirement)
  return n;
}

int64_t Engine::blocks_held() const { return blocks_private() + (cache_ ? cache_->blocks() : 0); }

int64_t Engine::blocks_needed(const Sequence& s, int64_t rows) const {
  // The target's cache after the step's rows; the drafter's runs ahead by its drafted block. Blocks shared
  // through the prefix cache are the cache's.
  const int64_t shared = std::min(s.state().shared_blocks(),
                                  s.draft_context ? s.draft_context->shared_blocks() : s.state().shared_blocks());
  return blocks_for(s.state().length() + rows + (s.draft_context ? lookahead_ : 0)) - shared;
}

size_t Engine::worst_swap_bytes(int64_t worst_positions, bool drafts) const {
  return target_swap_fixed_ + static_cast<size_t>(blocks_for(worst_positions)) * target_swap_per_block_ +
         (drafts && proposer_ ? proposer_->swap_bytes_bound(worst_positions) : 0);
}

size_t Engine::swap_reservation_with(int64_t worst_blocks, size_t worst_swap) const {
  // Live sequences in admission order: running_ and swapped_ are each sorted by id.
  std::vector<const Sequence*> live;
  live.reserve(running_.size() + swapped_.size());
  for (size_t r = 0, w = 0; r < running_.size() || w < swapped_.size();) {
    const bool take_running = w == swapped_.size() || (r < running_.size() && running_[r]->id() < swapped_[w]->id());
    live.push_back(take_running ? running_[r++].get() : swapped_[w++].get());
  }
  std::vector<BudgetEntry> entries;
  entries.reserve(live.size() + 1);
  for (const Sequence* s : live)
    entries.push_back({blocks_for(s->worst_positions()), s->worst_swap_bytes, s->swapped_out(), s->swapped_bytes()});
  entries.push_back({worst_blocks, worst_swap, false, 0});
  return swap_reservation(entries, options_.kv_blocks);
}

int64_t Engine::blocks_after(std::span<const PlannedSpan> plan) const {
  std::vector<int64_t> blocks(running_.size());
  for (size_t i = 0; i < running_.size(); ++i) blocks[i] = running_[i]->kv_blocks();
  for (const PlannedSpan& p : plan) blocks[p.seq] = std::max(blocks[p.seq], blocks_needed(*running_[p.seq], p.rows));
  int64_t total = cache_ ? cache_->blocks() : 0;
  for (int64_t b : blocks) total += b;
  return total;
}

std::vector<PlannedSpan> Engine::plan_with_blocks() {
  for (;;) {
    bool held = false;
    std::vector<PlannedSpan> plan = plan_rows(&held);
    int64_t need = blocks_after(plan);
    // Unheld cached blocks go before anyone is preempted.
    if (cache_) {
      const int64_t sequences = need - cache_->blocks();
      while (sequences + cache_->blocks() > options_.kv_blocks && cache_->evict_one()) {
      }
      need = sequences + cache_->blocks();
    }
    if (need <= options_.kv_blocks) {
      if (held) {
        metrics_.prefill_held_steps.fetch_add(1, std::memory_order_relaxed);
        step_trace_.prefill_held();
      }
      return plan;
    }
    // Never reached while submit() refuses requests whose worst case exceeds the budget.
    SS_CHECK(running_.size() > 1, "engine: one sequence needs {} KV blocks of {}", need, options_.kv_blocks);
    preempt_newest();
  }
}

void Engine::preempt_newest() {
  std::unique_ptr<Sequence> s = std::move(running_.back());
  running_.pop_back();
  const size_t bytes = s->swap_bytes();
  try {
    // The reservation at admission guarantees the room (engine/kv_budget.h).
    SS_CHECK(swap_used_ + bytes <= options_.swap_space_bytes,
             "the swap space is full ({} of {} bytes used, {} more needed)", swap_used_, options_.swap_space_bytes,
             bytes);
    s->swap_out();
  } catch (const std::exception& e) {
    // Its blocks are still held: ending it frees them (the step goes on without it).
    SS_LOG_ERROR("engine", "swapping out request {} failed: {}", s->id(), e.what());
    s->finish(FinishReason::Error, std::string("preemption failed: ") + e.what(), metrics_);
    s.reset();
    metrics_.requests_running.fetch_sub(1);
    publish_budget_gauges();
    return;
  }
  swap_used_ += bytes;
  metrics_.preemptions.fetch_add(1, std::memory_order_relaxed);
  metrics_.swap_out_bytes.fetch_add(bytes, std::memory_order_relaxed);
  metrics_.requests_swapped.fetch_add(1);
  SS_LOG_DEBUG("engine", "request {} swapped out ({} bytes, {} positions)", s->id(), bytes, s->state().length());
  insert_in_admission_order(swapped_, std::move(s));
  publish_budget_gauges();
}

void Engine::resume_swapped() {
  while (!swapped_.empty() && static_cast<int>(running_.size()) < options_.max_seqs) {
    Sequence& s = *swapped_.front();
    // The blocks its next step needs (a prefill chunk, or its decode / verify rows).
    const int64_t rows = s.prefilling() ? prefill_chunk_end(plan_input(s), options_.prefill_chunk) - s.prefilled()
                                        : 1 + static_cast<int64_t>(s.drafts.size());
    if (!make_room(blocks_needed(s, rows) + admission_headroom(running_.size()))) break;
    std::unique_ptr<Sequence> back = std::move(swapped_.front());
    swapped_.erase(swapped_.begin());
    metrics_.requests_swapped.fetch_sub(1);
    const size_t bytes = back->swapped_bytes();
    swap_used_ -= bytes;
    try {
      back->swap_in();
    } catch (const std::exception& e) {
      SS_LOG_ERROR("engine", "swapping in request {} failed: {}", back->id(), e.what());
      back->finish(FinishReason::Error, std::string("resuming after preemption failed: ") + e.what(), metrics_);
      back.reset();
      metrics_.requests_running.fetch_sub(1);
      continue;
    }
    metrics_.swap_in_bytes.fetch_add(bytes, std::memory_order_relaxed);
    insert_in_admission_order(running_, std::move(back));
  }
  publish_budget_gauges();
}

void Engine::publish_budget_gauges() {
  // Used: the sequences' own blocks and the cached ones they hold; the cache's unheld ones are free to
  // evict (and counted in prefix_cache_blocks with the held ones).
  metrics_.kv_blocks_used.store(blocks_private() + (cache_ ? cache_->held_blocks() : 0));
  metrics_.prefix_cache_blocks.store(cache_ ? cache_->blocks() : 0);
  metrics_.swap_space_used_bytes.store(static_cast<int64_t>(swap_used_));
}

}  // namespace specserve::engine
