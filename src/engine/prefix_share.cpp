// The prefix cache inside the engine (docs/DESIGN.md §5): the Engine member functions that look a prompt
// up, start a sequence from a hit, and put a sequence's prefill-computed blocks, drafter blocks and
// DeltaNet snapshots into the cache. The index itself is engine/prefix_cache.h.
#include <algorithm>

#include "core/error.h"
#include "core/log.h"
#include "engine/engine.h"
#include "engine/kv_budget.h"

namespace specserve::engine {

namespace {
constexpr int64_t kGrid = 64;  // the chunked DeltaNet's chunk: snapshot points and hybrid hits lie on it
// A prompt's last grid point is a snapshot point (its chunk ends there) only from this many positions on.
// The cut costs one more forward, which streams all the weights again: on an H200 a 128-token prompt on
// the 27B hybrid took 66-71 ms as two 64-row forwards against 40.5 ms as one. The snapshot saves the next
// turn re-prefilling those positions, worth more than a forward only past break-even: ~33 ms for a small
// forward at ~8.4k prefill tokens/s is ~280 positions; 256 is the grid point under it. Below it the prompt
// runs without the cut (the interval and branch stops stay).
constexpr int64_t kMinLastStop = 256;
}  // namespace

SeqPlanInput Engine::plan_input(int64_t prompt_len, int64_t prefilled, int drafts) const {
  SeqPlanInput in{prompt_len, prefilled, drafts};
  if (snapshot_blocks_ > 0) {
    // Chunks end where the DeltaNet state is to be kept (engine/batch_plan.h).
    in.stop_interval = options_.prefix_cache_state_interval;
    const int64_t last = (prompt_len - 1) / kGrid * kGrid;
    if (last >= kMinLastStop) in.last_stop = last;
  }
  return in;
}

SeqPlanInput Engine::plan_input(const Sequence& s) const {
  SeqPlanInput in = plan_input(s.prompt_len(), s.prefilled(), static_cast<int>(s.drafts.size()));
  if (snapshot_blocks_ > 0) in.branch_stop = s.branch_stop;
  in.waited = s.prefill_waited;
  return in;
}

int64_t Engine::branch_stop(const std::vector<int32_t>& prompt, int64_t hit_positions) const {
  if (!cache_ || snapshot_blocks_ == 0) return 0;
  const auto max_blocks = static_cast<int64_t>(prompt.size() - 1) / kKvBlockSize;
  const auto matched = static_cast<int64_t>(cache_->match(prompt, max_blocks).size()) * kKvBlockSize;
  const int64_t stop = matched / kGrid * kGrid;
  return stop > hit_positions ? stop : 0;
}

bool Engine::make_room(int64_t blocks) {
  const int64_t sequences = blocks_private();
  auto cached = [&] { return cache_ ? cache_->blocks() : int64_t{0}; };
  while (sequences + cached() + blocks > options_.kv_blocks && cache_ && cache_->evict_one()) {
  }
  return sequences + cached() + blocks <= options_.kv_blocks;
}

std::vector<PrefixEntryId> Engine::find_prefix_hit(const std::vector<int32_t>& prompt, bool drafts) const {
  if (!cache_) return {};
  // At least the last prompt token is prefilled: its logits give the first token.
  const auto max_blocks = static_cast<int64_t>(prompt.size() - 1) / kKvBlockSize;
  std::vector<PrefixEntryId> hit = cache_->match(prompt, max_blocks);
  if (drafts) {
    // A speculating request needs the drafter's context for every cached position.
    const auto missing =
        std::find_if(hit.begin(), hit.end(), [&](PrefixEntryId id) { return cache_->draft_block(id) == nullptr; });
    hit.erase(missing, hit.end());
  }
  if (snapshot_blocks_ > 0) {
    // A hybrid target resumes from a DeltaNet snapshot: the hit ends at the last entry holding one (all
    // on the 64-position grid).
    while (!hit.empty() && cache_->snapshot(hit.back()).empty()) hit.pop_back();
  }
  return hit;
}

void Engine::start_from_prefix(Sequence& s, std::span<const PrefixEntryId> hit) {
  if (hit.empty()) return;
  const auto positions = static_cast<int64_t>(hit.size()) * kKvBlockSize;
  std::vector<void*> target, draft;
  for (PrefixEntryId id : hit) {
    target.push_back(cache_->target_block(id));
    draft.push_back(cache_->draft_block(id));
  }
  s.state().adopt_prefix(target, positions);
  if (snapshot_blocks_ > 0) model_.restore_snapshot(cache_->snapshot(hit.back()), s.state());
  if (s.draft_context) s.draft_context->adopt_prefix(draft);
  s.advance_prefill(positions);
  for (PrefixEntryId id : hit) s.prefix.add(id);  // the references admit() took
  s.cached_tokens = positions;
}

// Between steps: every full block of prompt positions the sequence computed by prefill goes into the
// cache (or, when an entry with the same tokens is there, the sequence switches to the entry's identical
// block and frees its own); then its drafter blocks whose rows are projected; then, at a snapshot point,
// the DeltaNet state.
void Engine::publish_prefix(Sequence& s) {
  if (!cache_ || s.swapped_out() || s.failed() || s.prefix_closed) return;
  SequenceState& st = s.state();
  if (st.pending() != 0) return;
  const std::vector<int32_t>& prompt = s.request().prompt;
  const int64_t computed = s.prefilled();  // prompt positions in the model, all computed by prefill
  SS_CHECK(s.prefix.size() == st.shared_blocks(), "prefix cache: sequence {} holds {} entries for {} shared blocks",
           s.id(), s.prefix.size(), st.shared_blocks());
  while ((st.shared_blocks() + 1) * kKvBlockSize <= computed) {
    const int64_t j = st.shared_blocks();
    const PrefixEntryId parent = j == 0 ? kNoPrefixEntry : s.prefix.ids()[static_cast<size_t>(j - 1)];
    const auto tokens = std::span(prompt).subspan(static_cast<size_t>(j * kKvBlockSize), kKvBlockSize);
    const PrefixCache::Inserted in = cache_->insert(parent, tokens, st.kv_block(j));
    if (in.id == kNoPrefixEntry) {
      s.prefix_closed = true;  // a hash collision: the rest of its blocks stay its own
      break;
    }
    st.share_next_block(in.created ? nullptr : cache_->target_block(in.id));
    s.prefix.add(in.id);
  }
  if (DraftContext* dc = s.draft_context.get(); dc && proposer_->kv_pool()) {
    while (dc->shared_blocks() < st.shared_blocks() &&
           (dc->shared_blocks() + 1) * kKvBlockSize <= dc->cached_positions()) {
      const PrefixEntryId id = s.prefix.ids()[static_cast<size_t>(dc->shared_blocks())];
      void* cached = cache_->draft_block(id);
      if (!cached) cache_->set_draft_block(id, dc->kv_block(dc->shared_blocks()));
      dc->share_next_block(cached);
    }
  }
  // The DeltaNet state is at `computed` until the next chunk runs: keep it when that is a snapshot point.
  if (snapshot_blocks_ == 0) return;
  const SeqPlanInput in = plan_input(s);
  const bool stop_point = computed > 0 && computed < s.prompt_len() && computed % kGrid == 0 &&
                          (computed % in.stop_interval == 0 || computed == in.last_stop || computed == in.branch_stop);
  if (stop_point && st.length() == computed && st.shared_blocks() * kKvBlockSize >= computed) {
    const PrefixEntryId id = s.prefix.ids()[static_cast<size_t>(computed / kKvBlockSize - 1)];
    // Never at the cost of a preemption: only while the running sequences' headroom stays free.
    if (cache_->snapshot(id).empty() && make_room(snapshot_blocks_ + admission_headroom(running_.size()))) {
      std::vector<void*> blocks;
      KvBlockPool& pool = *model_.kv_pool();
      for (int64_t i = 0; i < snapshot_blocks_; ++i) blocks.push_back(pool.allocate());
      model_.save_snapshot(st, blocks);
      cache_->set_snapshot(id, std::move(blocks));
    }
  }
}

}  // namespace specserve::engine
