#include "engine/prefix_cache.h"

#include <algorithm>
#include <cstring>

#include "backend/ops.h"
#include "core/error.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace specserve::engine {

uint64_t prefix_block_hash(uint64_t parent, std::span<const int32_t> tokens) {
  return XXH3_64bits_withSeed(tokens.data(), tokens.size_bytes(), parent);
}

PrefixCache::PrefixCache(std::shared_ptr<KvBlockPool> target, std::shared_ptr<KvBlockPool> draft, Hash hash)
    : target_pool_(std::move(target)), draft_pool_(std::move(draft)), hash_(hash) {
  SS_CHECK(target_pool_ != nullptr, "prefix cache: needs the target's KV pool");
}

PrefixCache::~PrefixCache() {
  for (PrefixEntryId id = 0; id < static_cast<PrefixEntryId>(entries_.size()); ++id)
    if (entries_[id].live) remove(id);
}

std::vector<PrefixEntryId> PrefixCache::match(std::span<const int32_t> tokens, int64_t max_blocks) const {
  std::vector<PrefixEntryId> out;
  PrefixEntryId parent = kNoPrefixEntry;
  uint64_t key = 0;
  for (int64_t j = 0; j < max_blocks && (j + 1) * kKvBlockSize <= static_cast<int64_t>(tokens.size()); ++j) {
    const auto block = tokens.subspan(static_cast<size_t>(j * kKvBlockSize), kKvBlockSize);
    key = hash_(key, block);
    const auto it = by_key_.find(key);
    if (it == by_key_.end()) break;
    const Entry& e = entries_[it->second];
    // The key alone is not trusted: the tokens and the parent must match too.
    if (e.parent != parent || std::memcmp(e.tokens, block.data(), sizeof(e.tokens)) != 0) break;
    out.push_back(it->second);
    parent = it->second;
  }
  return out;
}

void PrefixCache::unfile(PrefixEntryId id) {
  const Entry& e = entries_[id];
  if (candidate(e)) lru_.erase({e.tick, id});
}

void PrefixCache::file(PrefixEntryId id) {
  const Entry& e = entries_[id];
  if (candidate(e)) lru_.insert({e.tick, id});
}

void PrefixCache::acquire(std::span<const PrefixEntryId> ids) {
  for (PrefixEntryId id : ids) {
    Entry& e = entries_[id];
    SS_CHECK(e.live, "prefix cache: acquiring a dead entry {}", id);
    unfile(id);
    if (e.refs++ == 0) --unheld_entries_;
    e.tick = ++clock_;
    file(id);
  }
}

void PrefixCache::release(std::span<const PrefixEntryId> ids) {
  // Deepest first: a chain released at once leaves its leaf the least recently used, so eviction
  // shortens chains from their end.
  for (auto it = ids.rbegin(); it != ids.rend(); ++it) {
    Entry& e = entries_[*it];
    SS_CHECK(e.live && e.refs > 0, "prefix cache: releasing entry {} with no reference", *it);
    unfile(*it);
    if (--e.refs == 0) ++unheld_entries_;
    e.tick = ++clock_;
    file(*it);
  }
}

PrefixCache::Inserted PrefixCache::insert(PrefixEntryId parent, std::span<const int32_t> tokens, void* target_block) {
  SS_CHECK(tokens.size() == static_cast<size_t>(kKvBlockSize), "prefix cache: a block of {} tokens", tokens.size());
  SS_CHECK(parent == kNoPrefixEntry || entries_[parent].live, "prefix cache: insert under a dead entry");
  const uint64_t key = hash_(parent == kNoPrefixEntry ? 0 : entries_[parent].key, tokens);
  if (const auto it = by_key_.find(key); it != by_key_.end()) {
    const Entry& e = entries_[it->second];
    if (e.parent != parent || std::memcmp(e.tokens, tokens.data(), sizeof(e.tokens)) != 0) return {};
    const PrefixEntryId id = it->second;
    acquire(std::span(&id, 1));
    return {id, false};
  }
  PrefixEntryId id;
  if (!free_ids_.empty()) {
    id = free_ids_.back();
    free_ids_.pop_back();
  } else {
    id = static_cast<PrefixEntryId>(entries_.size());
    entries_.emplace_back();
  }
  Entry& e = entries_[id];
  e = Entry{};
  e.live = true;
  e.key = key;
  e.parent = parent;
  std::memcpy(e.tokens, tokens.data(), sizeof(e.tokens));
  e.target = target_block;
  e.refs = 1;
  e.tick = ++clock_;
  by_key_[key] = id;
  ++entry_count_;
  if (parent != kNoPrefixEntry) {
    unfile(parent);
    ++entries_[parent].children;
    file(parent);
  }
  file(id);
  return {id, true};
}

void PrefixCache::set_draft_block(PrefixEntryId id, void* block) {
  Entry& e = entries_[id];
  SS_CHECK(e.live && e.draft == nullptr && draft_pool_, "prefix cache: entry {} cannot take a drafter block", id);
  e.draft = block;
}

void PrefixCache::set_snapshot(PrefixEntryId id, std::vector<void*> blocks) {
  Entry& e = entries_[id];
  SS_CHECK(e.live && e.snapshot.empty() && !blocks.empty(), "prefix cache: entry {} cannot take a snapshot", id);
  unfile(id);
  snapshot_blocks_ += static_cast<int64_t>(blocks.size());
  e.snapshot = std::move(blocks);
  file(id);
}

void PrefixCache::remove(PrefixEntryId id) {
  Entry& e = entries_[id];
  unfile(id);
  for (void* b : e.snapshot) target_pool_->release(b);
  snapshot_blocks_ -= static_cast<int64_t>(e.snapshot.size());
  if (e.target) target_pool_->release(e.target);
  if (e.draft) draft_pool_->release(e.draft);
  if (e.refs == 0) --unheld_entries_;
  --entry_count_;
  by_key_.erase(e.key);
  if (e.parent != kNoPrefixEntry && entries_[e.parent].live) {
    unfile(e.parent);
    --entries_[e.parent].children;
    file(e.parent);
  }
  e = Entry{};
  free_ids_.push_back(id);
}

bool PrefixCache::evict_one() {
  if (lru_.empty()) return false;
  const PrefixEntryId id = lru_.begin()->second;
  Entry& e = entries_[id];
  if (e.refs == 0 && e.children == 0) {
    remove(id);
    return true;
  }
  // A held entry (or one with children): only its snapshot goes.
  unfile(id);
  for (void* b : e.snapshot) target_pool_->release(b);
  snapshot_blocks_ -= static_cast<int64_t>(e.snapshot.size());
  e.snapshot.clear();
  file(id);
  return true;
}

}  // namespace specserve::engine
