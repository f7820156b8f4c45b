// DrafterSequence's swap-out and swap-in (spec/drafter_sequence.h): the context K/V of the projected
// rows and the waiting rows go to a host image and come back into new blocks and buffers. Blocks past
// the projected rows hold only the scratch of the last drafted block (overwritten before it is read)
// and are freed without a copy.
#include <algorithm>

#include "core/error.h"
#include "spec/drafter_sequence.h"

namespace specserve::spec {

namespace {
int64_t blocks_covering(int64_t positions) { return (positions + kKvBlockSize - 1) / kKvBlockSize; }
}  // namespace

size_t DrafterSequence::swap_bytes() const {
  size_t bytes = static_cast<size_t>(blocks_covering(projected_)) * SwapImage::region_bytes(pool_->block_bytes());
  for (const WaitingPage& w : waiting_) bytes += SwapImage::region_bytes(w.view().nbytes());
  return bytes;
}

size_t DrafterSequence::swap_bytes_bound(size_t block_bytes, int64_t feature_width, int64_t positions,
                                         int64_t waiting) {
  // Each waiting page holds at least one row, its used rows rounded up to 64 bytes in the image.
  const auto w = static_cast<size_t>(std::max<int64_t>(0, waiting));
  return static_cast<size_t>(blocks_covering(positions)) * SwapImage::region_bytes(block_bytes) +
         w * (static_cast<size_t>(feature_width) * 4 + 64);
}

void DrafterSequence::swap_out() {
  SS_CHECK(!swapped_out_, "drafter swap-out: the context is already swapped out");
  const auto keep = static_cast<size_t>(blocks_covering(projected_));
  SS_CHECK(keep <= blocks_.size(), "drafter swap-out: {} blocks for {} rows but {} held", keep, projected_,
           blocks_.size());
  const size_t bb = pool_->block_bytes();
  SwapImage image(*mem_, swap_bytes());
  std::vector<CopyRegion> copies;
  for (size_t i = 0; i < keep; ++i) copies.push_back({image.next(bb), blocks_[i], bb});
  for (const WaitingPage& w : waiting_) {
    const size_t bytes = w.view().nbytes();
    copies.push_back({image.next(bytes), w.rows.as<void>(), bytes});
  }
  mem_->download_many(copies);
  for (size_t i = static_cast<size_t>(shared_); i < blocks_.size(); ++i) pool_->release(blocks_[i]);
  blocks_.clear();
  shared_ = 0;  // the holder drops its references to the shared ones
  waiting_pages_.clear();
  for (const WaitingPage& w : waiting_) waiting_pages_.emplace_back(w.rows.shape()[0], w.used);
  waiting_.clear();
  image_ = std::move(image);
  swapped_out_ = true;
}

void DrafterSequence::swap_in() {
  SS_CHECK(swapped_out_, "drafter swap-in: the context is not swapped out");
  ensure_blocks(projected_);
  const size_t bb = pool_->block_bytes();
  std::vector<CopyRegion> copies;
  image_.rewind();
  for (int64_t i = 0; i < blocks_covering(projected_); ++i)
    copies.push_back({blocks_[static_cast<size_t>(i)], image_.next(bb), bb});
  for (const auto& [capacity, used] : waiting_pages_) {
    waiting_.push_back({MemTensor::empty(*mem_, DType::F32, {capacity, feature_width_}), used});
    const size_t bytes = waiting_.back().view().nbytes();
    copies.push_back({waiting_.back().rows.as<void>(), image_.next(bytes), bytes});
  }
  mem_->upload_many(copies);
  image_.reset();
  waiting_pages_.clear();
  swapped_out_ = false;
}

}  // namespace specserve::spec
