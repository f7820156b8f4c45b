#include "spec/drafter_sequence.h"

#include "core/error.h"

namespace specserve::spec {

DrafterSequence::DrafterSequence(std::shared_ptr<KvBlockPool> pool, int64_t feature_width)
    : pool_(std::move(pool)), feature_width_(feature_width) {
  SS_CHECK(pool_ && feature_width_ > 0, "drafter sequence: needs a KV pool and a positive feature width");
}

DrafterSequence::~DrafterSequence() {
  for (float* b : blocks_) pool_->release(b);
}

void DrafterSequence::append(int64_t first_position, std::span<const float> features) {
  SS_CHECK(first_position == rows(),
           "drafter context: rows must arrive in position order, got position {} while holding {} rows",
           first_position, rows());
  SS_CHECK(static_cast<int64_t>(features.size()) % feature_width_ == 0,
           "drafter context: {} feature floats is not a whole number of {}-wide rows", features.size(), feature_width_);
  waiting_.insert(waiting_.end(), features.begin(), features.end());
}

void DrafterSequence::mark_projected() {
  projected_ += waiting_rows();
  // A prefill can leave a large buffer behind; steady-state steps reuse a small one.
  if (waiting_.capacity() > static_cast<size_t>(64 * feature_width_))
    std::vector<float>().swap(waiting_);
  else
    waiting_.clear();
}

void DrafterSequence::ensure_blocks(int64_t positions) {
  while (static_cast<int64_t>(blocks_.size()) * kKvBlockSize < positions) blocks_.push_back(pool_->allocate());
}

}  // namespace specserve::spec
