#include "model/kv_cache.h"

#include <algorithm>

#include "core/error.h"

namespace specserve {

void KvBlockPool::reserve(int64_t blocks) {
  std::lock_guard lock(mutex_);
  const int64_t have = in_use_ + static_cast<int64_t>(free_.size());
  if (blocks <= have || block_bytes() == 0) return;
  const auto missing = static_cast<size_t>(blocks - have);
  const size_t bytes = missing * block_bytes();
  require_room(*memory_, bytes, fmt::format("the KV cache of {} blocks", blocks),
               " (lower --kv-cache-mib or --max-seqs)");
  slabs_.emplace_back(*memory_, bytes);
  auto* base = static_cast<char*>(slabs_.back().data());
  for (size_t i = missing; i-- > 0;) free_.push_back(base + i * block_bytes());
}

void* KvBlockPool::allocate() {
  std::lock_guard lock(mutex_);
  if (free_.empty()) {
    // Slabs of 64 blocks (or fewer for very large blocks): few allocations, stable addresses.
    const size_t block_bytes = this->block_bytes();
    const size_t per_slab =
        std::max<size_t>(1, std::min<size_t>(64, (size_t{256} << 20) / std::max<size_t>(1, block_bytes)));
    slabs_.emplace_back(*memory_, block_bytes * per_slab);
    auto* base = static_cast<char*>(slabs_.back().data());
    for (size_t i = per_slab; i-- > 0;) free_.push_back(base + i * block_bytes);
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

}  // namespace specserve
