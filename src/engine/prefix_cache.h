#pragma once
// The prefix cache's index (docs/DESIGN.md §5): full 16-token blocks of prompt KV computed by prefill,
// keyed by a hash chain, reference-counted, shared read-only between sequences, evicted least recently
// used when nothing holds them.
//
// An entry is one block of 16 prompt positions [16·j, 16·j + 16): the target's KV block, optionally the
// drafter context's K/V block for the same positions (a DFlash sequence adds it once its rows are
// projected), and optionally a snapshot of the DeltaNet state and conv windows at its end (hybrid
// targets; stored in target KV blocks). Its key is hash(parent's key, its 16 token ids); the entry keeps
// its tokens and its parent, and a lookup compares both, so a hash collision is a miss, never a false
// hit (by induction the whole prefix matched).
//
// Ownership. The cache owns every block of its entries and gives them back to their pools only when it
// evicts the entry. A sequence holding an entry (acquire) uses its blocks read-only; it holds the
// entries of a prefix of its block table, so an entry's ancestors are held whenever it is. Eviction
// takes, least recently used first, either an unheld entry without cached children (then every unheld
// entry is reclaimable, leaves first) or the snapshot of any entry (a snapshot is read only while a hit
// restores it, synchronously at admission). Budget: one budget block per entry (its target and drafter
// KV block, engine/kv_budget.h) plus one per snapshot block.
#include <cstdint>
#include <memory>
#include <set>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "model/kv_cache.h"

namespace specserve::engine {

using PrefixEntryId = int32_t;
inline constexpr PrefixEntryId kNoPrefixEntry = -1;

// The key of a block of tokens after a prefix whose last block has key `parent` (0 for the first block):
// XXH3-64 of the parent key and the token ids.
uint64_t prefix_block_hash(uint64_t parent, std::span<const int32_t> tokens);

class PrefixCache {
 public:
  using Hash = uint64_t (*)(uint64_t parent, std::span<const int32_t> tokens);
  // `target` holds the target blocks and snapshot blocks, `draft` the drafter blocks (may be null: no
  // drafter blocks are ever added). `hash` is injectable for tests (e.g. one that always collides).
  PrefixCache(std::shared_ptr<KvBlockPool> target, std::shared_ptr<KvBlockPool> draft, Hash hash = &prefix_block_hash);
  ~PrefixCache();
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  // The entries of the longest cached chain of full blocks of `tokens`, from block 0, at most
  // `max_blocks` of them (no reference taken, nothing touched).
  std::vector<PrefixEntryId> match(std::span<const int32_t> tokens, int64_t max_blocks) const;
  // Takes / drops one reference on each entry (and marks them used now).
  void acquire(std::span<const PrefixEntryId> ids);
  void release(std::span<const PrefixEntryId> ids);

  // The entry of the 16 `tokens` after `parent` (kNoPrefixEntry: the first block), with `target_block`
  // handed to the cache and one reference taken for the caller. When an entry with these tokens after
  // this parent exists, it is returned instead (reference taken, `target_block` untouched: the caller
  // keeps or frees its own, identical block and reads the entry's); `created` says which. When the key
  // is taken by other tokens (a hash collision), returns kNoPrefixEntry and nothing changes.
  struct Inserted {
    PrefixEntryId id = kNoPrefixEntry;
    bool created = false;
  };
  Inserted insert(PrefixEntryId parent, std::span<const int32_t> tokens, void* target_block);

  void* target_block(PrefixEntryId id) const { return entries_[id].target; }
  void* draft_block(PrefixEntryId id) const { return entries_[id].draft; }
  // Hands a drafter block to an entry that has none.
  void set_draft_block(PrefixEntryId id, void* block);
  // The DeltaNet snapshot at the entry's end (empty: none).
  const std::vector<void*>& snapshot(PrefixEntryId id) const { return entries_[id].snapshot; }
  // Hands the target-pool blocks holding a snapshot to an entry that has none.
  void set_snapshot(PrefixEntryId id, std::vector<void*> blocks);
  int32_t refs(PrefixEntryId id) const { return entries_[id].refs; }

  // Evicts the least recently used candidate (an unheld leaf entry, or a snapshot); false when none.
  bool evict_one();

  // Budget blocks the cache holds: entries + snapshot blocks.
  int64_t blocks() const { return entry_count_ + snapshot_blocks_; }
  // ... of which entries held by some sequence (their snapshots excluded).
  int64_t held_blocks() const { return entry_count_ - unheld_entries_; }
  // ... of which evict_one() can free, repeatedly: unheld entries and every snapshot.
  int64_t reclaimable_blocks() const { return unheld_entries_ + snapshot_blocks_; }
  int64_t entries() const { return entry_count_; }

 private:
  struct Entry {
    bool live = false;
    uint64_t key = 0;
    PrefixEntryId parent = kNoPrefixEntry;
    int32_t tokens[16] = {};
    void* target = nullptr;
    void* draft = nullptr;
    std::vector<void*> snapshot;
    int32_t refs = 0;
    int32_t children = 0;
    uint64_t tick = 0;
  };
  bool candidate(const Entry& e) const { return (e.refs == 0 && e.children == 0) || !e.snapshot.empty(); }
  // Re-files `id` in the eviction order after a change of its state or tick.
  void unfile(PrefixEntryId id);
  void file(PrefixEntryId id);
  void remove(PrefixEntryId id);

  std::shared_ptr<KvBlockPool> target_pool_, draft_pool_;
  Hash hash_;
  std::vector<Entry> entries_;
  std::vector<PrefixEntryId> free_ids_;
  std::unordered_map<uint64_t, PrefixEntryId> by_key_;
  std::set<std::pair<uint64_t, PrefixEntryId>> lru_;  // eviction candidates by (tick, id)
  uint64_t clock_ = 0;
  int64_t entry_count_ = 0, unheld_entries_ = 0, snapshot_blocks_ = 0;
};

// The entries a sequence holds (a prefix of its block table), released when it is destroyed or reset.
class PrefixHold {
 public:
  PrefixHold() = default;
  ~PrefixHold() { reset(); }
  PrefixHold(const PrefixHold&) = delete;
  PrefixHold& operator=(const PrefixHold&) = delete;
  void bind(PrefixCache* cache) { cache_ = cache; }
  PrefixCache* cache() const { return cache_; }
  // Records an entry the holder took a reference on (in block order).
  void add(PrefixEntryId id) { ids_.push_back(id); }
  const std::vector<PrefixEntryId>& ids() const { return ids_; }
  int64_t size() const { return static_cast<int64_t>(ids_.size()); }
  void reset() {
    if (cache_ && !ids_.empty()) cache_->release(ids_);
    ids_.clear();
  }

 private:
  PrefixCache* cache_ = nullptr;
  std::vector<PrefixEntryId> ids_;
};

}  // namespace specserve::engine
