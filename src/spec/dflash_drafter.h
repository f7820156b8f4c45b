#pragma once
// The DFlash drafter (docs/DFLASH.md §1): a stack of Qwen3 decoder layers that reads the target's
// hidden states as injected K/V and drafts a whole block in one forward pass.
//
//   context rows (per committed position t):  c_t = hidden_norm(fc([h_t^(l1); …; h_t^(lK)]))
//       → per layer: k_norm(k_proj c_t) roped at t, v_proj c_t → the sequence's paged cache (once)
//   block (per step): [pending, mask × γ] at positions s..s+γ, embedded with the TARGET's table
//       → L_D layers: queries from the block only; keys/values = cached context + the block's own
//         (full layers: every block row sees all of them, non-causal; sliding layers: causal inside
//         the block and limited to the window, §1.7)
//       → the drafter's final norm (plain RMSNorm) → the TARGET's lm_head on slots 1..γ
//         (slot 0 is untrained and discarded; slot k predicts the token AT position s+k).
//
// One call serves every sequence of an engine step: all waiting context rows and all block rows go
// through one matmul per weight. Every op is row-invariant (backend/ops.h), so a sequence's drafts
// do not depend on which other sequences share the call — unless the matmul order is Free (the
// default, set_matmul_order): then the backend may run the drafter's larger matmuls through a
// faster GEMM whose summation order follows the call's rows (the CUDA backend: cuBLASLt above 32
// rows), and a draft may differ with the batch. The emitted tokens never do: the target verifies
// every draft (docs/DESIGN.md §1), so the order moves acceptance at most, by a near-tied draft here and
// there. RowInvariant keeps the drafts batch-independent (and a seeded --draft-sampling sample run
// reproducible whatever else is batched).
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backend/memory.h"
#include "backend/ops.h"
#include "core/tensor.h"
#include "model/target_model.h"
#include "spec/dflash_checkpoint.h"
#include "spec/drafter_sequence.h"

namespace specserve::tokenizer {
class Tokenizer;
}

namespace specserve::spec {

// --draft-matmul: "fast" → MatmulOrder::Free, "exact" → MatmulOrder::RowInvariant (throws Error
// naming the values otherwise).
MatmulOrder parse_draft_matmul(std::string_view name);
inline constexpr const char* kDraftMatmulHelp =
    "fast (default: on a GPU the drafter's larger matmuls through cuBLASLt and its attention on tensor cores; "
    "drafts may depend on the batch, tokens never do) or exact (row-invariant drafter, drafts independent of the "
    "batch)";

struct DraftBlock {
  DrafterSequence* sequence = nullptr;
  int32_t pending_token = 0;  // the anchor, slot 0
  int64_t position = 0;       // s, its absolute position; must equal sequence->rows()
  // Output slots 1..slots of this block go to the lm_head (0: the call's `slots`; at most those): a
  // sequence drafting fewer than the call's most scores only the rows it drafts from. The block itself is
  // whole either way, so its slots' values do not change.
  int slots = 0;
};

class DFlashDrafter {
 public:
  // Loads DIR against `target` (whose embedding table and lm_head the drafter uses; it must outlive
  // the drafter). `dtype`: "auto" (the checkpoint's), "f32" or "bf16", as for the target.
  // The drafter runs where the target's forward runs (its weights, context KV and activations in
  // that memory, e.g. on the GPU), or on the host with `on_host` (a CPU drafter beside a GPU target,
  // for comparisons).
  static std::unique_ptr<DFlashDrafter> load(const std::string& dir, const TargetModel& target,
                                             const std::string& dtype = "auto", bool on_host = false);
  std::string_view backend() const { return ops_->name(); }
  // Whether the drafter runs on a device (then beside the target, in its forward memory).
  bool on_device() const { return mem_->device() != Device::CPU; }
  // A drafter of `config`'s shapes with seeded random weights, beside `target` (in its memory), for
  // benchmarks on real shapes (bench steps --synthetic).
  static std::unique_ptr<DFlashDrafter> synthetic(const ModelConfig& config, const TargetModel& target,
                                                  uint64_t seed = 2);

  const ModelConfig& config() const { return checkpoint_->config(); }
  int block_size() const { return checkpoint_->dflash().block_size; }
  int32_t mask_token() const { return static_cast<int32_t>(checkpoint_->dflash().mask_token_id); }
  // Target decoder layers whose outputs feed the drafter, in concatenation order.
  const std::vector<int>& target_layer_ids() const { return checkpoint_->dflash().target_layer_ids; }
  int64_t feature_width() const;  // K · H floats per context row
  int64_t vocab_size() const { return target_.vocab_size(); }

  // The drafter's output vocabulary (--draft-vocab): by default the target's whole lm_head scores
  // every id. With `ids` (ascending, unique, inside [0, vocab_size())) only those rows are scored:
  // they are gathered once into a compact head beside the drafter's weights, so a propose reads
  // and multiplies ids.size() rows instead of the vocabulary (the 27B drafter's lm_head over
  // 248,320 ids is 2.5 GB a propose). Drafts then never leave the subset; the target still verifies
  // every draft, so the output is unchanged and only acceptance can move (an id outside the subset
  // is never drafted). An empty list restores the whole vocabulary.
  void set_vocabulary(std::vector<int32_t> ids);
  // --draft-vocab ARG (spec/draft_vocabulary.h): nothing for "all" or "", else set_vocabulary with the
  // subset it names, joined by the added tokens of `tok` (may be null) and the target's EOS ids.
  // Returns whether a subset was set.
  bool select_vocabulary(const std::string& arg, const tokenizer::Tokenizer* tok);
  // The ids the drafter scores, ascending (empty: all of them).
  const std::vector<int32_t>& vocabulary() const { return head_ids_; }
  // Columns of the drafter's logits: vocabulary().size(), or vocab_size() for the whole vocabulary.
  int64_t head_rows() const { return head_ids_.empty() ? vocab_size() : static_cast<int64_t>(head_ids_.size()); }

  // The order of the drafter's matmuls (see the head of this file); Free by default.
  void set_matmul_order(MatmulOrder order) { matmul_order_ = order; }
  MatmulOrder matmul_order() const { return matmul_order_; }

  std::unique_ptr<DrafterSequence> new_sequence() const;
  // Start-up sizing of the context KV pool (as TargetModel::reserve).
  size_t kv_block_bytes() const { return pool_->block_bytes(); }
  // Bytes of the drafter's own weights (a propose reads them all, plus the target's lm_head or the
  // compact head of a vocabulary subset, head_bytes()).
  size_t weight_bytes() const;
  size_t head_bytes() const;
  void reserve_kv_blocks(int64_t blocks) const { pool_->reserve(blocks); }
  // The context KV pool (the prefix cache keeps blocks of it: docs/DESIGN.md §5).
  std::shared_ptr<KvBlockPool> kv_pool() const { return pool_; }

  // Projects the waiting context rows of `sequences` into their caches (no drafting): bounds the
  // memory of waiting rows during long prefills. Bit-identical to projecting them later.
  void project_context(std::span<DrafterSequence* const> sequences) const;

  // Runs one block of gamma + 1 rows per entry (1 <= gamma < block_size is the caller's choice;
  // the trained block is gamma = block_size - 1), first projecting the waiting context rows of
  // those sequences. Returns the logits of slots 1..slots (slots = gamma when 0; at most gamma; a block's
  // own DraftBlock::slots, when set, fewer): [Σ_i slots_i, vocab], block i's slot k at row
  // Σ_{j<i} slots_j + k - 1 (i * slots + k - 1 when no block sets its own); with a vocabulary
  // subset, ids outside it are -inf (never drafted, probability 0 when sampled). (Slot k's output
  // depends on the whole block — attention inside it is non-causal — so the first n drafts of a
  // full block differ from the n drafts of a block of n + 1 rows.)
  Tensor draft_logits(std::span<const DraftBlock> blocks, int gamma, int slots = 0) const;
  // The same rows reduced to their argmax over the ids below `columns` (Ops::argmax; -1 for a row
  // without a finite entry), in the same order: a raw-argmax request's drafts, without the rows
  // leaving the device. (With a subset, over the subset's ids below `columns`: the lowest id wins a
  // tie either way, since the compact head keeps the ids in ascending order.)
  std::vector<int32_t> draft_argmax(std::span<const DraftBlock> blocks, int gamma, int slots, int64_t columns) const;

 private:
  DFlashDrafter(const TargetModel& target, std::unique_ptr<DrafterCheckpoint> checkpoint, bool on_host);
  // The output slots' logits in the drafter's memory, [rows, vocab_size()], or with a subset [rows,
  // head_pitch_] whose first head_rows() columns are the subset's (empty when there are no blocks).
  MemTensor forward(std::span<DrafterSequence* const> context_of, std::span<const DraftBlock> blocks, int gamma,
                    int slots) const;
  MemTensor run_blocks(std::span<const DraftBlock> blocks, int gamma, int slots) const;

  const TargetModel& target_;
  std::unique_ptr<DrafterCheckpoint> checkpoint_;
  const Ops* ops_;
  const Memory* mem_;
  DrafterWeights weights_;         // views into mem_ (the checkpoint's own on the host)
  Buffer device_weights_;          // the uploaded weights (device drafters)
  std::vector<int32_t> head_ids_;  // set_vocabulary: the compact head's ids, ascending
  Buffer head_;                    // ... and its rows of the target's lm_head, in the drafter's memory
  DType head_dtype_ = DType::F32;
  int64_t head_pitch_ = 0;  // the compact head's rows: head_rows() padded to a multiple of 64
  KvGeometry kv_;
  std::shared_ptr<KvBlockPool> pool_;
  MatmulOrder matmul_order_ = MatmulOrder::Free;
};

}  // namespace specserve::spec
