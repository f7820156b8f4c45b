#include "model/kv_cache.h"

#include <algorithm>
#include <map>

#include "core/error.h"

namespace specserve {

KvBlockPool::KvBlockPool(const KvGeometry& geo, std::vector<const Memory*> planes)
    : geo_(geo), memory_(std::move(planes)) {
  SS_CHECK(!memory_.empty(), "a KV block pool needs at least one plane");
  slabs_.resize(memory_.size());
}

void KvBlockPool::add_slab(size_t blocks) {
  const size_t bytes = blocks * plane_bytes();
  for (size_t p = 0; p < memory_.size(); ++p) slabs_[p].emplace_back(*memory_[p], bytes);
  auto* base = static_cast<char*>(slabs_[0].back().data());
  const auto at = std::upper_bound(by_base_.begin(), by_base_.end(), std::make_pair(base, size_t{0}));
  by_base_.insert(at, {base, slabs_[0].size() - 1});
  for (size_t i = blocks; i-- > 0;) free_.push_back(base + i * plane_bytes());
}

void KvBlockPool::reserve(int64_t blocks) {
  std::lock_guard lock(mutex_);
  const int64_t have = in_use_ + static_cast<int64_t>(free_.size());
  if (blocks <= have || plane_bytes() == 0) return;
  const auto missing = static_cast<size_t>(blocks - have);
  // Each memory must hold its planes (several when ranks share one memory: one GPU).
  std::map<const Memory*, size_t> need;
  for (const Memory* m : memory_) need[m] += missing * plane_bytes();
  for (const auto& [m, bytes] : need)
    require_room(*m, bytes, fmt::format("the KV cache of {} blocks", blocks), " (lower --kv-cache-mib or --max-seqs)");
  add_slab(missing);
}

void* KvBlockPool::allocate() {
  std::lock_guard lock(mutex_);
  if (free_.empty()) {
    // Slabs of 64 blocks (or fewer for very large blocks): few allocations, stable addresses.
    const size_t per_slab =
        std::max<size_t>(1, std::min<size_t>(64, (size_t{256} << 20) / std::max<size_t>(1, block_bytes())));
    add_slab(per_slab);
  }
  void* b = free_.back();
  free_.pop_back();
  ++in_use_;
  return b;
}

void KvBlockPool::release(void* block) {
  std::lock_guard lock(mutex_);
  free_.push_back(block);
  --in_use_;
}

int64_t KvBlockPool::blocks_in_use() const {
  std::lock_guard lock(mutex_);
  return in_use_;
}

int64_t KvBlockPool::blocks_allocated() const {
  std::lock_guard lock(mutex_);
  return in_use_ + static_cast<int64_t>(free_.size());
}

void* KvBlockPool::plane_block_locked(int plane, void* block) const {
  if (plane == 0) return block;
  auto* b = static_cast<char*>(block);
  auto it = std::upper_bound(by_base_.begin(), by_base_.end(), std::make_pair(b, SIZE_MAX));
  SS_CHECK(it != by_base_.begin(), "KV pool: {} is not one of its blocks", block);
  --it;
  const Buffer& slab0 = slabs_[0][it->second];
  const auto offset = static_cast<size_t>(b - it->first);
  SS_CHECK(offset < slab0.bytes(), "KV pool: {} is not one of its blocks", block);
  return static_cast<char*>(slabs_[static_cast<size_t>(plane)][it->second].data()) + offset;
}

void* KvBlockPool::plane_block(int plane, void* block) const {
  SS_CHECK(plane >= 0 && plane < planes(), "KV pool: plane {} of {}", plane, planes());
  std::lock_guard lock(mutex_);
  return plane_block_locked(plane, block);
}

void KvBlockPool::plane_blocks(int plane, std::span<void* const> blocks, std::vector<void*>& out) const {
  SS_CHECK(plane >= 0 && plane < planes(), "KV pool: plane {} of {}", plane, planes());
  out.clear();
  std::lock_guard lock(mutex_);
  for (void* b : blocks) out.push_back(plane_block_locked(plane, b));
}

}  // namespace specserve
