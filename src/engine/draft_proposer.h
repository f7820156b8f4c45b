#pragma once
// The seam where a speculative proposer (DFlash in src/spec; later MTP, n-gram) plugs into the
// engine's step loop (docs/DESIGN.md §2). The engine owns the loop and the target; a proposer owns
// its drafter and per-sequence context:
//
//   forward (captures capture_layers() for every row)
//     → per-row picks and sample-match acceptance (engine, through the request's Sampler)
//     → commit: target KV/state keeps pending + accepted rows; append_contexts() receives exactly
//       those rows' captured features (and every prefill row), for all sequences of the step at once
//     → propose(): ONE batched call for all speculating sequences, filling each one's drafts
//       for the next step's verify rows [pending, d1..dγ].
//
// Acceptance lives in the engine because it is just plain decoding's pick compared with the
// draft (docs/DESIGN.md §1.4); a proposer never decides what is emitted.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/tensor.h"
#include "model/kv_cache.h"

#include "sampling/sampler.h"

namespace specserve::engine {

// A proposer's per-sequence state (e.g. DFlash's drafter context rows and KV).
class DraftContext {
 public:
  virtual ~DraftContext() = default;
  // Sampled-draft mode: the processed distribution q (vocab floats) the k-th draft (0-based) of
  // the latest propose was drawn from; empty for point-mass drafts. With q the verifier accepts
  // with min(1, p/q) and samples the residual on rejection (engine/acceptance.h).
  virtual std::span<const float> draft_distribution(int k) const { return {}; }

  // Preemption by swap (engine/swap.h): the context's device memory (its KV cache's blocks, rows kept
  // for the drafter) moves to host memory and back bit for bit; everything else stays where it is.
  // Blocks of the proposer's KV pool held now as its own (one block of 16 positions each; blocks shared
  // through the prefix cache not counted).
  virtual int64_t kv_blocks() const { return 0; }

  // Prefix cache (docs/DESIGN.md §5): a context whose K/V for position p depends only on the tokens
  // [0, p] (DFlash: on the target's prefill features) can share whole blocks of 16 positions through the
  // cache, under the target's keys. A proposer without a KV pool (DraftProposer::kv_pool null) shares
  // nothing, and its speculating requests get no hits. Positions whose K/V are in the cache now:
  virtual int64_t cached_positions() const { return 0; }
  virtual int64_t shared_blocks() const { return 0; }
  virtual void* kv_block(int64_t i) const { return nullptr; }
  // As SequenceState::share_next_block: block shared_blocks() becomes the cache's (null: this context's
  // own is handed over) or is replaced by `cached`.
  virtual void share_next_block(void* cached) {}
  // A new context starts from cached blocks of positions [0, 16·n).
  virtual void adopt_prefix(std::span<void* const> blocks) {}
  // Host bytes swap_out() takes now.
  virtual size_t swap_bytes() const { return 0; }
  virtual void swap_out() {}
  virtual void swap_in() {}
};

struct ProposeItem {
  DraftContext* context = nullptr;
  int32_t pending_token = 0;                        // the anchor: picked, not yet in the target's KV
  int64_t pending_position = 0;                     // its absolute position
  const sampling::Sampler* sampler = nullptr;       // for penalty-aware drafting (docs/DESIGN.md §1.5)
  const sampling::SamplerState* history = nullptr;  // prompt + output up to and including the pending
                                                    // token: length() is d1's position
  int max_drafts = 0;                               // ≤ gamma(); fewer near max_tokens / the context end
  std::vector<int32_t>* drafts = nullptr;           // out: 0..max_drafts tokens
};

class DraftProposer {
 public:
  virtual ~DraftProposer() = default;
  virtual int gamma() const = 0;
  // Target decoder layers to capture for every row of every forward (empty: none needed).
  virtual std::vector<int> capture_layers() const = 0;
  virtual std::unique_ptr<DraftContext> new_context() = 0;
  // Positions past a sequence's committed length its context's KV cache may hold blocks for (DFlash:
  // the drafted block), for the engine's block accounting (engine/kv_budget.h).
  virtual int positions_past_context() const { return gamma() + 1; }
  // The most host bytes a context's swap_out() may take for a sequence of `positions` committed
  // positions (the swap space's reservation at admission, engine/kv_budget.h).
  virtual size_t swap_bytes_bound(int64_t positions) const { return 0; }
  // The pool its contexts' KV blocks come from (null: none, no prefix sharing): the prefix cache gives
  // evicted drafter blocks back to it.
  virtual std::shared_ptr<KvBlockPool> kv_pool() const { return nullptr; }
  // Whether the proposer takes captured features where the target computed them (a device), so the
  // engine asks the target to leave them there (ForwardBatch::capture_on_device) instead of
  // downloading them for the proposer to upload again.
  virtual bool wants_device_features() const { return false; }
  // The context rows of one step, for several sequences (each at most once), in ONE call: for each,
  // the rows of committed positions [first_position, first_position + n): `tokens` and their captured
  // features ([n, capture width] f32 rows, on the host or, when wants_device_features(), possibly on
  // the target's device; an empty view when nothing is captured). The views are valid only during the
  // call, so a proposer may move them in one go (on a device: one copy launch for all sequences).
  struct ContextRows {
    DraftContext* context = nullptr;
    int64_t first_position = 0;
    std::span<const int32_t> tokens;
    TensorView features;
  };
  virtual void append_contexts(std::span<const ContextRows> rows) = 0;
  // One batched propose for every speculating sequence of the step.
  virtual void propose(std::span<ProposeItem> items) = 0;
};

}  // namespace specserve::engine
