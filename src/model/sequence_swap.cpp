// SequenceState's swap-out and swap-in (model/sequence_state.h): the bytes of the KV blocks covering
// the committed positions and of every DeltaNet layer's state and conv window go to a host image and
// come back into new blocks and buffers. The other DeltaNet buffers (the work state and the pending
// rows of an extend) are scratch between steps: they are freed and allocated again at their sizes.
#include <utility>

#include "core/error.h"
#include "model/sequence_state.h"

namespace specserve {

namespace {
int64_t blocks_covering(int64_t positions) { return (positions + kKvBlockSize - 1) / kKvBlockSize; }
}  // namespace

size_t SequenceState::swap_bytes(int64_t positions) const {
  size_t bytes = 0;
  if (pool_) bytes += static_cast<size_t>(blocks_covering(positions)) * SwapImage::region_bytes(pool_->block_bytes());
  const bool held = !swapped_out_;
  for (size_t i = 0; i < deltanet_.size(); ++i) {
    const size_t state = held ? deltanet_[i].state.bytes() : deltanet_sizes_[i][0];
    const size_t window = held ? deltanet_[i].window.bytes() : deltanet_sizes_[i][1];
    bytes += SwapImage::region_bytes(state) + SwapImage::region_bytes(window);
  }
  return bytes;
}

void SequenceState::swap_out() {
  SS_CHECK(!swapped_out_, "swap-out: the sequence is already swapped out");
  SS_CHECK(pending_ == 0, "swap-out: the sequence has {} uncommitted extend rows", pending_);
  const Memory* mem = pool_ ? &pool_->memory() : nullptr;
  for (const auto& l : deltanet_)
    if (!mem) mem = l.state.memory();
  if (!mem) {
    swapped_out_ = true;  // nothing held
    return;
  }
  SwapImage image(*mem, swap_bytes(length_));
  std::vector<CopyRegion> copies;
  const auto keep = static_cast<size_t>(blocks_covering(length_));
  SS_CHECK(keep <= blocks_.size(), "swap-out: {} blocks for {} positions but {} held", keep, length_, blocks_.size());
  for (size_t i = 0; i < keep; ++i)
    copies.push_back({image.next(pool_->block_bytes()), blocks_[i], pool_->block_bytes()});
  deltanet_sizes_.clear();
  for (const auto& l : deltanet_) {
    copies.push_back({image.next(l.state.bytes()), l.state.data(), l.state.bytes()});
    copies.push_back({image.next(l.window.bytes()), l.window.data(), l.window.bytes()});
    deltanet_sizes_.push_back({l.state.bytes(), l.window.bytes(), l.work.bytes(), l.pending_pre.bytes(),
                               l.pending_qkv.bytes(), l.pending_g.bytes(), l.pending_beta.bytes()});
  }
  try {
    mem->download_many(copies);
  } catch (...) {
    deltanet_sizes_.clear();  // nothing was freed: the sequence stays as it was
    throw;
  }
  // The bytes are on the host: give the device memory back (on a device, later work that reuses it
  // is enqueued after the copies).
  for (size_t i = static_cast<size_t>(shared_); i < blocks_.size(); ++i) pool_->release(blocks_[i]);
  blocks_.clear();
  shared_ = 0;  // the holder drops its references to the shared ones
  for (auto& l : deltanet_) {
    for (Buffer* b : {&l.state, &l.window, &l.work, &l.pending_pre, &l.pending_qkv, &l.pending_g, &l.pending_beta})
      b->reset();
  }
  image_ = std::move(image);
  swapped_out_ = true;
}

void SequenceState::swap_in() {
  SS_CHECK(swapped_out_, "swap-in: the sequence is not swapped out");
  if (image_.empty()) {
    swapped_out_ = false;
    return;
  }
  // The blocks and buffers come back in the memory the image was taken from (the model's).
  const Memory& mem = *image_.memory();
  std::vector<CopyRegion> copies;
  image_.rewind();
  if (pool_) {
    ensure_blocks(length_);
    const auto keep = static_cast<size_t>(blocks_covering(length_));
    for (size_t i = 0; i < keep; ++i)
      copies.push_back({blocks_[i], image_.next(pool_->block_bytes()), pool_->block_bytes()});
  }
  for (size_t i = 0; i < deltanet_.size(); ++i) {
    auto& l = deltanet_[i];
    const std::vector<size_t>& sz = deltanet_sizes_[i];
    Buffer* buffers[] = {&l.state, &l.window, &l.work, &l.pending_pre, &l.pending_qkv, &l.pending_g, &l.pending_beta};
    for (size_t b = 0; b < 7; ++b) *buffers[b] = sz[b] ? Buffer(mem, sz[b]) : Buffer();
    copies.push_back({l.state.data(), image_.next(sz[0]), sz[0]});
    copies.push_back({l.window.data(), image_.next(sz[1]), sz[1]});
  }
  mem.upload_many(copies);
  image_.reset();
  deltanet_sizes_.clear();
  swapped_out_ = false;
}

}  // namespace specserve
