#include "spec/drafter_sequence.h"

#include "core/error.h"

namespace specserve::spec {

DrafterSequence::DrafterSequence(std::shared_ptr<KvBlockPool> pool, int64_t feature_width, const Memory& mem)
    : pool_(std::move(pool)), feature_width_(feature_width), mem_(&mem) {
  SS_CHECK(pool_ && feature_width_ > 0, "drafter sequence: needs a KV pool and a positive feature width");
}

DrafterSequence::~DrafterSequence() {
  for (float* b : blocks_) pool_->release(b);
}

void DrafterSequence::append(int64_t first_position, std::span<const float> features) {
  SS_CHECK(features.size() % static_cast<size_t>(feature_width_) == 0,
           "drafter context: {} feature floats is not a whole number of {}-wide rows", features.size(), feature_width_);
  const auto n = static_cast<int64_t>(features.size()) / feature_width_;
  append(first_position, TensorView::contiguous(const_cast<float*>(features.data()), DType::F32, {n, feature_width_}));
}

void DrafterSequence::append(int64_t first_position, const TensorView& features) {
  SS_CHECK(first_position == rows(),
           "drafter context: rows must arrive in position order, got position {} while holding {} rows",
           first_position, rows());
  SS_CHECK(features.ndim() == 2 && features.dim(1) == feature_width_ && features.dtype == DType::F32 &&
               features.is_contiguous(),
           "drafter context: features {} are not contiguous f32 rows of width {}", features.describe(), feature_width_);
  SS_CHECK(features.device == Device::CPU || features.device == mem_->device(),
           "drafter context: features on another device than the drafter's memory");
  if (features.dim(0) == 0) return;
  MemTensor rows = MemTensor::empty(*mem_, DType::F32, features.shape);
  if (features.device == Device::CPU)
    mem_->upload(rows.as<void>(), features.data, features.nbytes());
  else
    mem_->copy(rows.as<void>(), features.data, features.nbytes());
  waiting_.push_back(std::move(rows));
  waiting_rows_ += features.dim(0);
}

void DrafterSequence::mark_projected() {
  projected_ += waiting_rows_;
  waiting_.clear();
  waiting_rows_ = 0;
}

void DrafterSequence::ensure_blocks(int64_t positions) {
  while (static_cast<int64_t>(blocks_.size()) * kKvBlockSize < positions) blocks_.push_back(pool_->allocate());
}

}  // namespace specserve::spec
