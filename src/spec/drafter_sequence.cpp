#include "spec/drafter_sequence.h"

#include <algorithm>

#include "core/error.h"

namespace specserve::spec {

DrafterSequence::DrafterSequence(std::shared_ptr<KvBlockPool> pool, int64_t feature_width, const Memory& mem)
    : pool_(std::move(pool)), feature_width_(feature_width), mem_(&mem) {
  SS_CHECK(pool_ && feature_width_ > 0, "drafter sequence: needs a KV pool and a positive feature width");
}

DrafterSequence::~DrafterSequence() {
  for (size_t i = static_cast<size_t>(shared_); i < blocks_.size(); ++i) pool_->release(blocks_[i]);
}

void DrafterSequence::share_next_block(void* cached) {
  SS_CHECK(shared_ < kv_blocks() && (shared_ + 1) * kKvBlockSize <= projected_,
           "drafter context: block {} cannot be shared ({} blocks, {} rows projected)", shared_, kv_blocks(),
           projected_);
  auto& slot = blocks_[static_cast<size_t>(shared_)];
  if (cached && cached != slot) {
    pool_->release(slot);
    slot = cached;
  }
  ++shared_;
}

void DrafterSequence::adopt_prefix(std::span<void* const> blocks) {
  SS_CHECK(rows() == 0 && blocks_.empty() && !swapped_out_, "drafter context: adopt_prefix on a used context");
  blocks_.assign(blocks.begin(), blocks.end());
  shared_ = static_cast<int64_t>(blocks.size());
  projected_ = shared_ * kKvBlockSize;
}

void DrafterSequence::append_many(std::span<const Append> rows) {
  // Every row is checked before any is queued: a refused call leaves every sequence as it was.
  const Memory* mem = nullptr;
  for (size_t i = 0; i < rows.size(); ++i) {
    const Append& a = rows[i];
    const DrafterSequence& s = *a.sequence;
    const TensorView& f = a.features;
    for (size_t j = 0; j < i; ++j)
      SS_CHECK(rows[j].sequence != a.sequence, "drafter context: a sequence appears twice in one append");
    SS_CHECK(a.first_position == s.rows(),
             "drafter context: rows must arrive in position order, got position {} while holding {} rows",
             a.first_position, s.rows());
    SS_CHECK(f.ndim() == 2 && f.dim(1) == s.feature_width_ && f.dtype == DType::F32 && f.is_contiguous(),
             "drafter context: features {} are not contiguous f32 rows of width {}", f.describe(), s.feature_width_);
    SS_CHECK(f.device == Device::CPU || f.device == s.mem_->device(),
             "drafter context: features on another device than the drafter's memory");
    SS_CHECK(mem == nullptr || mem == s.mem_, "drafter context: sequences of different drafters in one append");
    mem = s.mem_;
  }
  std::vector<CopyRegion> copies;
  copies.reserve(rows.size());
  for (const Append& a : rows) {
    DrafterSequence& s = *a.sequence;
    const TensorView& f = a.features;
    const int64_t n = f.dim(0);
    if (n == 0) continue;
    const size_t row_bytes = static_cast<size_t>(s.feature_width_) * sizeof(float);
    const auto* src = static_cast<const char*>(f.data);
    // Rows [from, from + k) of the append into `page` after its used rows.
    auto put = [&](WaitingPage& page, int64_t from, int64_t k) {
      void* dst = page.rows.as<char>() + static_cast<size_t>(page.used) * row_bytes;
      const void* from_ptr = src + static_cast<size_t>(from) * row_bytes;
      const size_t bytes = static_cast<size_t>(k) * row_bytes;
      if (f.device == Device::CPU)
        s.mem_->upload(dst, from_ptr, bytes);
      else
        copies.push_back({dst, from_ptr, bytes});
      page.used += k;
    };
    int64_t done = 0;
    if (!s.waiting_.empty()) {  // the last page's room first
      WaitingPage& last = s.waiting_.back();
      done = std::min(n, last.rows.shape()[0] - last.used);
      if (done > 0) put(last, 0, done);
    }
    if (done < n) {
      const int64_t rest = n - done;
      s.waiting_.push_back(
          {MemTensor::empty(*s.mem_, DType::F32, {std::max(rest, kWaitingPageRows), s.feature_width_}), 0});
      put(s.waiting_.back(), done, rest);
    }
    s.waiting_rows_ += n;
  }
  if (!copies.empty()) mem->copy_many(copies);
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
