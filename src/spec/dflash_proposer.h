#pragma once
// The DFlash proposer: the engine's DraftProposer (engine/draft_proposer.h) over a DFlashDrafter.
//
// Per sequence it keeps the drafter context: one row per committed position (docs/DFLASH.md §5). The
// engine hands it every prefill row and, after each verify, exactly the rows of the pending token
// and the accepted drafts; never a rejected row, never the new pending token. So at every propose
//     drafter context rows == the target's committed length == the pending token's position,
// checked in debug builds (SS_DEBUG_CHECK) and by tests through context_rows().
//
// propose() runs ONE drafter forward for all items (blocks of block_size rows at s..s+block_size−1,
// or gamma + 1 rows without full_block) and turns each block's slots 1..max_drafts into drafts
// (spec/draft_selection.h). The block never depends on max_drafts, so a request's drafts never
// depend on how close it is to max_tokens, only how many of them are used.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/acceptance.h"
#include "engine/draft_proposer.h"
#include "spec/dflash_drafter.h"
#include "spec/draft_selection.h"

namespace specserve::spec {

struct DFlashProposerOptions {
  int gamma = 0;  // drafts per step, 1..block_size−1; 0: block_size − 1 (the trained block)
  // true: every draft block is the trained block ([pending, mask × (block_size − 1)]) and gamma only
  // says how many of its drafts are verified; false: a block of gamma + 1 rows (docs/DFLASH.md §4 read
  // literally). The drafter was trained on full blocks only and its in-block attention is
  // non-causal, so a shorter block is out of distribution: on the demo pair, γ = 3 accepts its first
  // draft 29 % of the time with a 4-row block against 81 % with the full block (docs/BENCHMARKS.md).
  bool full_block = true;
  DraftSelection selection = {};
  // Waiting context rows of one sequence beyond which append_contexts projects them at once
  // instead of at the next propose: bounds the K·H floats held per row during long prefills.
  int64_t max_waiting_rows = 256;
};

// The proposer options for the CLI flags --gamma, --draft-sampling and --verify-mode: raw-argmax
// verification pairs with raw-argmax drafting (Atlas's behaviour); with sampled drafts it is refused.
DFlashProposerOptions proposer_options(int gamma, DraftSampling sampling, engine::VerifyMode verify_mode);

class DFlashProposer final : public engine::DraftProposer {
 public:
  // `drafter` must outlive the proposer.
  explicit DFlashProposer(const DFlashDrafter& drafter, DFlashProposerOptions options = {});

  int gamma() const override { return gamma_; }
  std::vector<int> capture_layers() const override { return drafter_.target_layer_ids(); }
  std::unique_ptr<engine::DraftContext> new_context() override;
  // The drafted block's positions (block_size with full_block, else gamma + 1).
  int positions_past_context() const override;
  // The blocks of `positions` context rows and fewer than max_waiting_rows waiting rows (between steps
  // append_contexts has projected them at that many).
  size_t swap_bytes_bound(int64_t positions) const override;
  // The drafter runs where the target does: on a device it takes the captured rows there.
  bool wants_device_features() const override { return drafter_.on_device(); }
  std::shared_ptr<KvBlockPool> kv_pool() const override { return drafter_.kv_pool(); }
  // All rows of a step in one DrafterSequence::append_many (on a device: one copy launch).
  void append_contexts(std::span<const ContextRows> rows) override;
  void propose(std::span<engine::ProposeItem> items) override;

  // Context rows a sequence's drafter context holds (projected + waiting).
  static int64_t context_rows(const engine::DraftContext& context);
  // A context's drafter sequence (benchmarks project it outside their timed work).
  static DrafterSequence* sequence_of(engine::DraftContext& context);

 private:
  const DFlashDrafter& drafter_;
  DFlashProposerOptions options_;
  int gamma_ = 0;
  sampling::SamplerWorkspace workspace_;
  std::vector<DrafterSequence::Append> appends_;  // append_contexts'
  std::vector<DrafterSequence*> project_pass_;    // append_contexts' sequences projected in one pass
};

}  // namespace specserve::spec
