#pragma once
// Per-sequence state of a target model: the paged KV block table of the attention layers and, for
// each Gated DeltaNet layer, the f32 recurrent state S and the conv window (the last Kc-1 pre-conv
// rows).
//
// Lifecycle. A prefill span is committed as soon as it is computed. An extend span (1 decode row or
// K verify rows) leaves the state PENDING: the rows' keys/values are in the cache and the DeltaNet
// layers hold the state after all K rows in a work buffer, while the committed state is untouched.
// TargetModel::commit(state, n) keeps the first n rows (1 <= n <= K):
//   - attention: the length becomes base + n (rows past it are overwritten later);
//   - DeltaNet, n == K: the work buffer becomes the state (a pointer swap, no copy);
//   - DeltaNet, n < K: the recurrence is REPLAYED over the n kept rows from the committed state, using
//     each row's saved post-conv q/k/v, g and beta, with the very kernel decode uses, so the state is
//     bit-identical to having decoded those n rows; the conv window is rebuilt from the saved pre-conv
//     rows.
// Why replay instead of per-row snapshots: snapshots cost one full state copy per row per layer on
// EVERY verify (Qwen3.6-27B: 3 MiB x 48 layers x K), whether or not rows are rejected; replay costs
// nothing on full acceptance and n recurrent steps (a fraction of the extend's own DeltaNet work, no
// matmuls) on partial acceptance, plus K x (conv_dim + 2 Hv) floats of saved inputs. See
// docs/MODEL.md for the measurement.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "model/kv_cache.h"
#include "model/swap_image.h"

namespace specserve {

class SequenceState {
 public:
  SequenceState() = default;
  ~SequenceState();
  SequenceState(const SequenceState&) = delete;
  SequenceState& operator=(const SequenceState&) = delete;

  // Committed tokens (the next row's position).
  int64_t length() const { return length_; }
  // Rows of the last extend awaiting commit (0 when none).
  int64_t pending() const { return pending_; }
  // KV blocks in the block table (covering the committed positions and the last extend's rows).
  int64_t kv_blocks() const { return static_cast<int64_t>(blocks_.size()); }

  // Prefix sharing (docs/DESIGN.md §5). The first shared_blocks() blocks of the table belong to the prefix
  // cache: read-only (they hold full blocks of prompt positions, and new positions go to later blocks),
  // never given back to the pool by this sequence. The rest are its own.
  int64_t shared_blocks() const { return shared_; }
  int64_t private_blocks() const { return kv_blocks() - shared_; }
  void* kv_block(int64_t i) const { return blocks_[static_cast<size_t>(i)]; }
  // Block shared_blocks() becomes shared: with `cached` null this sequence's own block is handed to the
  // cache; else its own block is given back to the pool and `cached` (holding the same bits: docs/DESIGN.md
  // §5) takes its place. Between steps only.
  void share_next_block(void* cached);
  // A new, empty sequence starts from a cached prefix: `blocks` (shared) hold positions [0, 16·n); the
  // sequence's length becomes `positions` (16·n). The DeltaNet state at that position comes separately
  // (TargetModel::restore_snapshot).
  void adopt_prefix(std::span<void* const> blocks, int64_t positions);

  // Preemption by swap (engine/swap.h, model/sequence_swap.cpp), between steps only (no pending rows).
  // swap_out() copies the KV blocks covering the committed positions and every DeltaNet layer's state
  // and conv window into a host image (pinned on a device) and frees the blocks and the DeltaNet
  // buffers (shared blocks are copied like its own and left to the cache: the sequence comes back with
  // its own blocks only, and its holder drops its references); swap_in() takes new blocks (a new block table) and
  // buffers and copies the bytes back bit for bit, so the sequence continues exactly where it stopped. The image's
  // bytes for a sequence of `positions` committed positions (an upper bound at admission) and for this one now:
  size_t swap_bytes(int64_t positions) const;
  size_t swap_bytes() const { return swap_bytes(length_); }
  bool swapped_out() const { return swapped_out_; }
  void swap_out();
  void swap_in();

 private:
  friend class TargetModel;
  friend struct ModelInternals;

  // In the model's Memory (host for the CPU backend, device for CUDA; under tensor parallelism the slot's
  // rank's).
  struct DeltaNetLayer {
    const Memory* mem = nullptr;  // where its buffers live (and come back after a swap)
    Buffer state;                 // committed S [Hv, dk, dv] f32
    Buffer work;                  // S after the pending rows (extend only)
    Buffer window;                // [Kc-1, conv_dim] pre-conv rows before position length_
    Buffer pending_pre;           // [K, conv_dim] pre-conv rows of the pending extend
    Buffer pending_qkv;           // [K, conv_dim] post-conv, prepared q|k|v
    Buffer pending_g;             // [K, Hv]
    Buffer pending_beta;          // [K, Hv]
    int64_t pending_rows = 0;     // K
  };

  void ensure_blocks(int64_t positions);

  std::shared_ptr<KvBlockPool> pool_;
  std::vector<void*> blocks_;
  int64_t shared_ = 0;  // blocks_[0, shared_) belong to the prefix cache
  std::vector<DeltaNetLayer> deltanet_;
  int64_t length_ = 0;
  int64_t pending_ = 0;
  // While swapped out: the image, and each DeltaNet layer's buffer sizes to allocate again.
  bool swapped_out_ = false;
  SwapImage image_;
  std::vector<std::vector<size_t>> deltanet_sizes_;
};

}  // namespace specserve
