#pragma once
// The paged KV cache's block pool. A block (backend/ops.h KvGeometry) holds 16 consecutive positions
// of one sequence for every attention layer; sequences own lists of blocks (their block tables) and
// give them back when they end. A block is block_bytes() of the geometry's element type (f32 or bf16). Blocks are
// recycled through a free list; memory grows in slabs so block addresses never move. Slabs come from the pool's Memory
// (host for the CPU backend, device for CUDA: then the block pointers are device pointers, as cuda_ops() expects);
// under tensor parallelism each rank's slice of a block is in its own plane.
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <utility>
#include <vector>

#include "backend/memory.h"
#include "backend/ops.h"

namespace specserve {

class KvBlockPool {
 public:
  explicit KvBlockPool(const KvGeometry& geo, const Memory& memory = cpu_memory()) : KvBlockPool(geo, {&memory}) {}
  // Under tensor parallelism one plane per rank (docs/DESIGN.md §6.3), each in its rank's memory: a block is
  // one block of the geometry in every plane, at the same offset of the planes' slabs. allocate() hands out
  // plane 0's address, which names the block (block tables, the prefix cache); plane_block gives a plane's.
  KvBlockPool(const KvGeometry& geo, std::vector<const Memory*> planes);
  const KvGeometry& geometry() const { return geo_; }  // one plane's
  int planes() const { return static_cast<int>(memory_.size()); }
  const Memory& memory(int plane = 0) const { return *memory_[static_cast<size_t>(plane)]; }

  // Allocates up front so that at least `blocks` blocks exist (one slab for the missing ones): the
  // serving engine sizes the pool at start-up, so a running sequence never meets an allocation
  // failure. Throws a one-line Error with the sizes when the memory cannot hold them.
  void reserve(int64_t blocks);
  // One plane's block, and a whole block (every plane's: what the KV budget counts).
  size_t plane_bytes() const { return static_cast<size_t>(geo_.block_bytes()); }
  size_t block_bytes() const { return plane_bytes() * memory_.size(); }

  void* allocate();
  void release(void* block);
  int64_t blocks_in_use() const;
  int64_t blocks_allocated() const;
  // Plane `plane`'s block of `block` (an address allocate() handed out; plane 0: `block` itself).
  void* plane_block(int plane, void* block) const;
  // out[i] <- plane_block(plane, blocks[i]), under one lock.
  void plane_blocks(int plane, std::span<void* const> blocks, std::vector<void*>& out) const;

 private:
  // One slab in every plane; the free list holds plane 0's blocks.
  void add_slab(size_t blocks);
  void* plane_block_locked(int plane, void* block) const;
  KvGeometry geo_;
  std::vector<const Memory*> memory_;  // per plane
  mutable std::mutex mutex_;
  std::vector<std::vector<Buffer>> slabs_;         // [plane][slab]
  std::vector<std::pair<char*, size_t>> by_base_;  // plane 0's slabs (base, slab index), sorted by base
  std::vector<void*> free_;
  int64_t in_use_ = 0;
};

}  // namespace specserve
