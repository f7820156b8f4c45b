#include "spec/dflash_proposer.h"

#include <algorithm>
#include <type_traits>

#include "core/error.h"

namespace specserve::spec {

namespace {

class DFlashContext final : public engine::DraftContext {
 public:
  explicit DFlashContext(std::unique_ptr<DrafterSequence> s) : sequence(std::move(s)) {}

  std::span<const float> draft_distribution(int k) const override {
    if (q.empty() || k < 0 || k >= q_rows) return {};
    const size_t V = q.size() / static_cast<size_t>(q_rows);
    return std::span<const float>(q).subspan(static_cast<size_t>(k) * V, V);
  }

  int64_t kv_blocks() const override { return sequence->private_blocks(); }
  int64_t cached_positions() const override { return sequence->projected(); }
  int64_t shared_blocks() const override { return sequence->shared_blocks(); }
  void* kv_block(int64_t i) const override { return sequence->blocks()[i]; }
  void share_next_block(void* cached) override { sequence->share_next_block(cached); }
  void adopt_prefix(std::span<void* const> blocks) override { sequence->adopt_prefix(blocks); }
  size_t swap_bytes() const override { return sequence->swap_bytes(); }
  void swap_out() override { sequence->swap_out(); }
  void swap_in() override { sequence->swap_in(); }

  std::unique_ptr<DrafterSequence> sequence;
  std::vector<float> q;  // sampled-draft mode: q of each draft of the latest propose (host memory)
  int q_rows = 0;
};

template <typename Context>  // DraftContext or const DraftContext
auto& as_dflash(Context& c) {
  auto* d = dynamic_cast<std::conditional_t<std::is_const_v<Context>, const DFlashContext, DFlashContext>*>(&c);
  SS_CHECK(d != nullptr, "DFlash proposer: a draft context from another proposer");
  return *d;
}

}  // namespace

DFlashProposerOptions proposer_options(int gamma, DraftSampling sampling, engine::VerifyMode verify_mode) {
  const bool raw = verify_mode == engine::VerifyMode::RawArgmax;
  SS_CHECK(!(raw && sampling == DraftSampling::Sample),
           "--verify-mode raw-argmax compares argmaxes; it cannot be combined with --draft-sampling sample");
  DFlashProposerOptions o;
  o.gamma = gamma;
  o.selection = {sampling, raw};
  return o;
}

DFlashProposer::DFlashProposer(const DFlashDrafter& drafter, DFlashProposerOptions options)
    : drafter_(drafter), options_(options) {
  const int block = drafter_.block_size();
  gamma_ = options_.gamma == 0 ? block - 1 : options_.gamma;
  SS_CHECK(gamma_ >= 1 && gamma_ <= block - 1, "--gamma must be in [1, {}] for a block-{} drafter (got {})", block - 1,
           block, options_.gamma);
}

std::unique_ptr<engine::DraftContext> DFlashProposer::new_context() {
  return std::make_unique<DFlashContext>(drafter_.new_sequence());
}

int DFlashProposer::positions_past_context() const { return options_.full_block ? drafter_.block_size() : gamma_ + 1; }

size_t DFlashProposer::swap_bytes_bound(int64_t positions) const {
  return DrafterSequence::swap_bytes_bound(drafter_.kv_block_bytes(), drafter_.feature_width(), positions,
                                           std::min(positions, options_.max_waiting_rows));
}

int64_t DFlashProposer::context_rows(const engine::DraftContext& context) {
  return as_dflash(context).sequence->rows();
}

DrafterSequence* DFlashProposer::sequence_of(engine::DraftContext& context) {
  return as_dflash(context).sequence.get();
}

void DFlashProposer::append_contexts(std::span<const ContextRows> rows) {
  std::vector<DrafterSequence::Append>& appends = appends_;  // its storage reused from step to step
  appends.clear();
  for (const ContextRows& r : rows) {
    DrafterSequence& seq = *as_dflash(*r.context).sequence;
    SS_CHECK(r.features.ndim() == 2 && r.features.dim(0) == static_cast<int64_t>(r.tokens.size()) &&
                 r.features.dim(1) == seq.feature_width(),
             "DFlash proposer: features {} for {} rows of width {} (capture_layers() not captured?)",
             r.features.describe(), r.tokens.size(), seq.feature_width());
    appends.push_back({&seq, r.first_position, r.features});
  }
  DrafterSequence::append_many(appends);
  // Long prefills: a sequence's waiting rows are projected once there are many (max_waiting_rows). The
  // sequences past it in one step (those that started together reach it together) are projected in
  // passes of up to kProjectRows waiting rows rather than one pass each: 64 plain-decoding sequences
  // otherwise cost 64 drafter passes in one step every 256 steps.
  constexpr int64_t kProjectRows = 2048;
  std::vector<DrafterSequence*>& pass = project_pass_;
  pass.clear();
  int64_t pass_rows = 0;
  for (const auto& a : appends) {
    const int64_t waiting = a.sequence->waiting_rows();
    if (waiting < options_.max_waiting_rows) continue;
    if (!pass.empty() && pass_rows + waiting > kProjectRows) {
      drafter_.project_context(pass);
      pass.clear();
      pass_rows = 0;
    }
    pass.push_back(a.sequence);
    pass_rows += waiting;
  }
  if (!pass.empty()) drafter_.project_context(pass);
}

void DFlashProposer::propose(std::span<engine::ProposeItem> items) {
  std::vector<DraftBlock> blocks;
  std::vector<engine::ProposeItem*> drafting;
  for (auto& item : items) {
    SS_CHECK(item.context && item.drafts && item.sampler && item.history, "DFlash proposer: incomplete propose item");
    DFlashContext& ctx = as_dflash(*item.context);
    item.drafts->clear();
    ctx.q.clear();
    ctx.q_rows = 0;
    if (item.max_drafts <= 0) continue;
    // The context-accumulation invariant (docs/DFLASH.md §5): one row per committed position.
    SS_DEBUG_CHECK(ctx.sequence->rows() == item.pending_position,
                   "DFlash proposer: drafter context holds {} rows but the pending token is at position {}",
                   ctx.sequence->rows(), item.pending_position);
    SS_DEBUG_CHECK(static_cast<int64_t>(item.history->length()) == item.pending_position + 1,
                   "DFlash proposer: history of {} tokens for a pending token at position {}", item.history->length(),
                   item.pending_position);
    // Only the slots it drafts from reach the lm_head (the block stays whole: the drafts do not change).
    blocks.push_back(
        {ctx.sequence.get(), item.pending_token, item.pending_position, std::min(item.max_drafts, gamma_)});
    drafting.push_back(&item);
  }
  if (blocks.empty()) return;
  const int block_gamma = options_.full_block ? drafter_.block_size() - 1 : gamma_;

  // Requests whose pick is the raw argmax take the argmax of the drafter rows too: penalty-aware
  // processing is then the identity, and the rows need not leave the device (the drafter's side of
  // the engine's DeviceArgmax picker, engine/row_picker.h; here all of the batch or none).
  const int64_t columns = drafting.front()->sampler->vocab().real();
  const bool by_argmax = options_.selection.sampling == DraftSampling::Argmax && !options_.selection.raw &&
                         std::all_of(drafting.begin(), drafting.end(), [&](const engine::ProposeItem* item) {
                           return item->sampler->picks_raw_argmax() && item->sampler->vocab().real() == columns;
                         });
  if (by_argmax) {
    const std::vector<int32_t> ids = drafter_.draft_argmax(blocks, block_gamma, gamma_, columns);
    size_t at = 0;  // block i's first slot row
    for (size_t i = 0; i < drafting.size(); ++i) {
      const int n = blocks[i].slots;
      for (int k = 0; k < n; ++k) drafting[i]->drafts->push_back(sampling::backend_argmax_pick(ids[at + k]));
      at += static_cast<size_t>(n);
    }
    return;
  }

  const Tensor logits = drafter_.draft_logits(blocks, block_gamma, gamma_);
  const auto V = static_cast<size_t>(drafter_.vocab_size());
  size_t at = 0;  // block i's first slot row
  for (size_t i = 0; i < drafting.size(); ++i) {
    engine::ProposeItem& item = *drafting[i];
    DFlashContext& ctx = as_dflash(*item.context);
    const int n = blocks[i].slots;
    const std::span<const float> rows(logits.as<float>() + at * V, static_cast<size_t>(n) * V);
    at += static_cast<size_t>(n);
    select_drafts(rows, n, *item.sampler, *item.history, options_.selection, workspace_, *item.drafts, ctx.q);
    ctx.q_rows = ctx.q.empty() ? 0 : n;
  }
}

}  // namespace specserve::spec
