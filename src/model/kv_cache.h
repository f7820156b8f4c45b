#pragma once
// The paged KV cache's block pool. A block (backend/ops.h KvGeometry) holds 16 consecutive positions
// of one sequence for every attention layer; sequences own lists of blocks (their block tables) and
// give them back when they end. A block is block_bytes() of the geometry's element type (f32 or bf16). Blocks are
// recycled through a free list; memory grows in slabs so block addresses never move. Slabs come from the pool's Memory
// (host for the CPU backend, device for CUDA: then the block pointers are device pointers, as cuda_ops() expects).
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "backend/memory.h"
#include "backend/ops.h"

namespace specserve {

class KvBlockPool {
 public:
  explicit KvBlockPool(const KvGeometry& geo, const Memory& memory = cpu_memory()) : geo_(geo), memory_(&memory) {}
  const KvGeometry& geometry() const { return geo_; }
  const Memory& memory() const { return *memory_; }

  // Allocates up front so that at least `blocks` blocks exist (one slab for the missing ones): the
  // serving engine sizes the pool at start-up, so a running sequence never meets an allocation
  // failure. Throws a one-line Error with the sizes when the memory cannot hold them.
  void reserve(int64_t blocks);
  size_t block_bytes() const { return static_cast<size_t>(geo_.block_bytes()); }

  void* allocate();
  void release(void* block);
  int64_t blocks_in_use() const;
  int64_t blocks_allocated() const;

 private:
  KvGeometry geo_;
  const Memory* memory_;
  mutable std::mutex mutex_;
  std::vector<Buffer> slabs_;
  std::vector<void*> free_;
  int64_t in_use_ = 0;
};

}  // namespace specserve
