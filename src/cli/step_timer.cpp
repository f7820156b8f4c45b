#include "cli/step_timer.h"

#include <algorithm>

#include "cli/step_bench_common.h"

namespace specserve::cli {

StepTimer::StepTimer(TargetModel& target, int context, int max_batch, int max_k, int prefill_chunk, std::mt19937& rng)
    : target_(target) {
  const int64_t V = target.vocab_size();
  for (int i = 0; i < max_batch; ++i) {
    seqs_.push_back(target.new_sequence());
    step_bench::prefill(target, *seqs_.back(), step_bench::random_tokens(static_cast<size_t>(context), rng, V),
                        prefill_chunk);
  }
  tokens_ = step_bench::random_tokens(static_cast<size_t>(32 + max_k), rng, V);
}

ForwardBatch StepTimer::extend_batch(int batch, int k, LogitsWanted logits, int64_t argmax_columns, int extra) const {
  ForwardBatch b;
  for (int i = 0; i < batch; ++i) {
    const auto rows = static_cast<size_t>(k + (i < extra ? 1 : 0));
    b.spans.push_back({seqs_[static_cast<size_t>(i)].get(), std::span<const int32_t>(tokens_).subspan(i % 32, rows),
                       SpanMode::Extend, logits, argmax_columns});
  }
  return b;
}

void StepTimer::commit_one(int batch) {
  std::vector<std::pair<SequenceState*, int64_t>> commits;
  for (int i = 0; i < batch; ++i) commits.emplace_back(seqs_[static_cast<size_t>(i)].get(), 1);
  target_.commit_many(commits);
}

void StepTimer::step(int batch, int k, int extra) {
  target_.forward(extend_batch(batch, k, LogitsWanted::All, target_.vocab_size(), extra));
  commit_one(batch);
}

ProposeTimer::ProposeTimer(const TargetModel& target, const spec::DFlashDrafter& drafter, int context, int appended,
                           int prefill_chunk, std::vector<int32_t> tokens)
    : target_(target),
      drafter_(drafter),
      context_(context),
      appended_(appended),
      rows_(MemTensor::empty(target.forward_memory(), DType::F32,
                             {std::max(prefill_chunk, appended), drafter.feature_width()})),
      tokens_(std::move(tokens)) {
  target.forward_memory().fill_uniform(rows_.as<void>(), DType::F32, static_cast<size_t>(rows_.view().numel()), 3,
                                       -1.0f, 1.0f);
}

void ProposeTimer::propose(int batch, int slots) {
  while (static_cast<int>(ctx_.size()) < batch) {
    ctx_.push_back(drafter_.new_sequence());
    step_bench::fill_drafter_context(drafter_, *ctx_.back(), context_, rows_.view());
  }
  // Each sequence's new context rows, in one copy as the engine hands them over (append_contexts).
  std::vector<spec::DrafterSequence::Append> appends;
  for (int i = 0; i < batch; ++i) {
    spec::DrafterSequence& d = *ctx_[static_cast<size_t>(i)];
    appends.push_back({&d, d.rows(), rows_.view().rows(0, appended_)});
  }
  spec::DrafterSequence::append_many(appends);
  std::vector<spec::DraftBlock> blocks;
  for (int i = 0; i < batch; ++i) {
    spec::DrafterSequence& d = *ctx_[static_cast<size_t>(i)];
    blocks.push_back({&d, tokens_[static_cast<size_t>(i) % tokens_.size()], d.rows(), slots});
  }
  const int gamma = drafter_.block_size() - 1;
  drafter_.draft_argmax(blocks, gamma, gamma, target_.vocab_size());
}

}  // namespace specserve::cli
