#include "model/sequence_state.h"

namespace specserve {

SequenceState::~SequenceState() {
  if (pool_)
    for (void* b : blocks_) pool_->release(b);
}

void SequenceState::ensure_blocks(int64_t positions) {
  if (!pool_) return;  // a model without attention layers
  while (static_cast<int64_t>(blocks_.size()) * kKvBlockSize < positions) blocks_.push_back(pool_->allocate());
}

}  // namespace specserve
