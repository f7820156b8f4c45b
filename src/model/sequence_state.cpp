#include "model/sequence_state.h"

#include "core/error.h"

namespace specserve {

SequenceState::~SequenceState() {
  if (pool_)
    for (size_t i = static_cast<size_t>(shared_); i < blocks_.size(); ++i) pool_->release(blocks_[i]);
}

void SequenceState::share_next_block(void* cached) {
  SS_CHECK(pending_ == 0 && shared_ < kv_blocks(), "share_next_block: block {} of {} (pending {})", shared_,
           kv_blocks(), pending_);
  auto& slot = blocks_[static_cast<size_t>(shared_)];
  if (cached && cached != slot) {
    pool_->release(slot);
    slot = cached;
  }
  ++shared_;
}

void SequenceState::adopt_prefix(std::span<void* const> blocks, int64_t positions) {
  SS_CHECK(length_ == 0 && blocks_.empty() && pending_ == 0 && !swapped_out_, "adopt_prefix: the sequence is not new");
  SS_CHECK(positions == static_cast<int64_t>(blocks.size()) * kKvBlockSize, "adopt_prefix: {} positions in {} blocks",
           positions, blocks.size());
  blocks_.assign(blocks.begin(), blocks.end());
  shared_ = static_cast<int64_t>(blocks.size());
  length_ = positions;
}

void SequenceState::ensure_blocks(int64_t positions) {
  if (!pool_) return;  // a model without attention layers
  while (static_cast<int64_t>(blocks_.size()) * kKvBlockSize < positions) blocks_.push_back(pool_->allocate());
}

}  // namespace specserve
