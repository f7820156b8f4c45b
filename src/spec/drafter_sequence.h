#pragma once
// One sequence's drafter context (docs/DFLASH.md §3, §5): one context row per committed position.
//
// A row arrives as the target's captured features f_t (K·H floats) of a committed position and is
// kept WAITING, in the drafter's memory (on a device drafter: copied there from the target's rows on
// the same device, or uploaded from the host), until the drafter next runs, so the fc projection and
// the per-layer k/v projections of every waiting row of every sequence happen in one matmul per weight
// together with the drafted blocks. The drafter then stores the row's per-layer context K/V (k_norm,
// RoPE at its absolute position) in this sequence's paged cache, where it stays: a context row is
// computed exactly once.
//
// Waiting rows are kept in pages of kWaitingPageRows rows, filled in order; rows that do not fit in the
// last page start a new one (of their own count when that is more). A sequence held at γ = 0 (a plain
// decode row: one new row a step, projected only when it next drafts) so takes one buffer per 16 steps,
// not one a step: on a device 16× fewer allocations and 16× fewer cudaMalloc calls while rows pile up
// (issue 29, every draft wrong: one-row buffers of the 8B shape's 80 KB came in fresh 2 MiB chunks of
// 16, about three cudaMalloc calls a step at 64 sequences). The pages' layout never reaches the
// drafter: it gathers the rows in order, so the projection's bits are the same.
//
// Invariant (checked by the proposer): projected + waiting == the target's committed length.
//
// Positions at and after `projected()` in the cache are scratch: the drafted block's K/V are
// written there for the duration of one drafter call and overwritten later by real context rows.
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "backend/memory.h"
#include "core/tensor.h"
#include "model/kv_cache.h"
#include "model/swap_image.h"

namespace specserve::spec {

class DrafterSequence {
 public:
  // `mem`: the drafter's memory, where waiting rows are kept (it must outlive the sequence).
  DrafterSequence(std::shared_ptr<KvBlockPool> pool, int64_t feature_width, const Memory& mem);
  ~DrafterSequence();
  DrafterSequence(const DrafterSequence&) = delete;
  DrafterSequence& operator=(const DrafterSequence&) = delete;

  // Context rows held: those in the cache plus those waiting to be projected.
  int64_t rows() const { return projected_ + waiting_rows(); }
  int64_t projected() const { return projected_; }
  int64_t waiting_rows() const { return waiting_rows_; }
  int64_t feature_width() const { return feature_width_; }

  // Queues each sequence's rows for positions [first_position, first_position + n), from
  // [n, feature_width] f32 rows on the host or in the drafter's memory's device: the one way context
  // rows arrive (the proposer's append_contexts passes a whole step's rows at once). Positions must
  // continue each context exactly (first_position == rows()): a gap or a repeated position poisons
  // every later draft (docs/DFLASH.md §10.4), so it is an Error. Each sequence at most once, all of one
  // drafter's memory; every row is checked before any is queued, and the device-resident ones are
  // copied in one Memory::copy_many (one launch on a device).
  struct Append {
    DrafterSequence* sequence = nullptr;
    int64_t first_position = 0;
    TensorView features;
  };
  static void append_many(std::span<const Append> rows);

  // --- for the drafter ---
  // Waiting rows: the first `used` rows of `rows` ([capacity, feature_width] f32 in the drafter's memory).
  struct WaitingPage {
    MemTensor rows;
    int64_t used = 0;
    TensorView view() const { return rows.view().rows(0, used); }
  };
  static constexpr int64_t kWaitingPageRows = 16;
  // The waiting rows in the drafter's memory, in position order across the pages.
  std::span<const WaitingPage> waiting_features() const { return waiting_; }
  // The waiting rows are now in the cache.
  void mark_projected();
  // Makes the block table cover positions [0, positions).
  void ensure_blocks(int64_t positions);
  void* const* blocks() const { return blocks_.data(); }
  int64_t kv_blocks() const { return static_cast<int64_t>(blocks_.size()); }

  // Prefix sharing (docs/DESIGN.md §5), as SequenceState's: the first shared_blocks() blocks belong to the
  // prefix cache and hold projected context rows only (read-only: projections and the drafted block's
  // scratch go to positions >= projected(), past them).
  int64_t shared_blocks() const { return shared_; }
  int64_t private_blocks() const { return kv_blocks() - shared_; }
  // Block shared_blocks() (whose 16 rows must be projected) becomes shared: handed to the cache when
  // `cached` is null, else given back to the pool and replaced by `cached` (the same bits).
  void share_next_block(void* cached);
  // A new, empty context starts from cached blocks holding the projected rows of positions [0, 16·n).
  void adopt_prefix(std::span<void* const> blocks);

  // Preemption by swap (engine/swap.h, spec/drafter_sequence_swap.cpp): swap_out() copies the blocks
  // holding the projected rows' K/V and the waiting rows into a host image and frees every block and
  // waiting row; swap_in() takes new blocks and buffers and copies the bytes back bit for bit, so the
  // context continues exactly where it stopped (waiting rows are projected when they would have been).
  // The image's bytes now, and at most for `positions` projected rows and `waiting` waiting rows (of a
  // drafter with KV blocks of `block_bytes` and context rows of `feature_width` floats):
  size_t swap_bytes() const;
  static size_t swap_bytes_bound(size_t block_bytes, int64_t feature_width, int64_t positions, int64_t waiting);
  bool swapped_out() const { return swapped_out_; }
  void swap_out();
  void swap_in();

 private:
  std::shared_ptr<KvBlockPool> pool_;
  int64_t feature_width_;
  std::vector<void*> blocks_;
  int64_t shared_ = 0;  // blocks_[0, shared_) belong to the prefix cache
  const Memory* mem_;
  std::vector<WaitingPage> waiting_;
  int64_t waiting_rows_ = 0;
  int64_t projected_ = 0;
  bool swapped_out_ = false;
  SwapImage image_;
  std::vector<std::pair<int64_t, int64_t>> waiting_pages_;  // while swapped out: each page's capacity and used
};

}  // namespace specserve::spec
