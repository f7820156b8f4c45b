// SequenceState's swap-out and swap-in (model/sequence_state.h): the bytes of the KV blocks covering
// the committed positions and of every DeltaNet layer's state and conv window go to a host image and
// come back into new blocks and buffers. The other DeltaNet buffers (the work state and the pending
// rows of an extend) are scratch between steps: they are freed and allocated again at their sizes.
#include <algorithm>
#include <utility>

#include "core/error.h"
#include "model/sequence_state.h"

namespace specserve {

namespace {
int64_t blocks_covering(int64_t positions) { return (positions + kKvBlockSize - 1) / kKvBlockSize; }
}  // namespace

size_t SequenceState::swap_bytes(int64_t positions) const {
  size_t bytes = 0;
  if (pool_)
    bytes += static_cast<size_t>(blocks_covering(positions)) * static_cast<size_t>(pool_->planes()) *
             SwapImage::region_bytes(pool_->plane_bytes());
  const bool held = !swapped_out_;
  for (size_t i = 0; i < deltanet_.size(); ++i) {
    const size_t state = held ? deltanet_[i].state.bytes() : deltanet_sizes_[i][0];
    const size_t window = held ? deltanet_[i].window.bytes() : deltanet_sizes_[i][1];
    bytes += SwapImage::region_bytes(state) + SwapImage::region_bytes(window);
  }
  return bytes;
}

namespace {
// Copies grouped by the memory that runs them (under tensor parallelism each rank's plane and DeltaNet slots
// are in its own), in the order they were added.
struct CopiesByMemory {
  std::vector<std::pair<const Memory*, std::vector<CopyRegion>>> groups;
  void add(const Memory& mem, CopyRegion c) {
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == &mem; });
    if (it == groups.end()) it = groups.insert(groups.end(), {&mem, {}});
    it->second.push_back(c);
  }
};

// The copies between `blocks`, plane by plane, and the image's next regions (to the image when
// `out`).
void add_block_copies(const KvBlockPool& pool, std::span<void* const> blocks, SwapImage& image, bool out,
                      CopiesByMemory& copies) {
  std::vector<void*> plane;
  const size_t bytes = pool.plane_bytes();
  for (int p = 0; p < pool.planes(); ++p) {
    pool.plane_blocks(p, blocks, plane);
    for (void* b : plane) {
      void* region = image.next(bytes);
      copies.add(pool.memory(p), out ? CopyRegion{region, b, bytes} : CopyRegion{b, region, bytes});
    }
  }
}
}  // namespace

// The image's regions, in order: the blocks of plane 0, of plane 1, …, then each DeltaNet slot's state and
// window; swap_in reads them in the same order.
void SequenceState::swap_out() {
  SS_CHECK(!swapped_out_, "swap-out: the sequence is already swapped out");
  SS_CHECK(pending_ == 0, "swap-out: the sequence has {} uncommitted extend rows", pending_);
  const Memory* mem = pool_ ? &pool_->memory() : nullptr;
  for (const auto& l : deltanet_)
    if (!mem) mem = l.mem;
  if (!mem) {
    swapped_out_ = true;  // nothing held
    return;
  }
  // Host memory any of the planes' devices can copy to (pinned host memory is portable under unified
  // addressing).
  SwapImage image(*mem, swap_bytes(length_));
  CopiesByMemory copies;
  const auto keep = static_cast<size_t>(blocks_covering(length_));
  SS_CHECK(keep <= blocks_.size(), "swap-out: {} blocks for {} positions but {} held", keep, length_, blocks_.size());
  if (pool_) add_block_copies(*pool_, std::span(blocks_).first(keep), image, true, copies);
  deltanet_sizes_.clear();
  for (const auto& l : deltanet_) {
    copies.add(*l.mem, {image.next(l.state.bytes()), l.state.data(), l.state.bytes()});
    copies.add(*l.mem, {image.next(l.window.bytes()), l.window.data(), l.window.bytes()});
    deltanet_sizes_.push_back({l.state.bytes(), l.window.bytes(), l.work.bytes(), l.pending_pre.bytes(),
                               l.pending_qkv.bytes(), l.pending_g.bytes(), l.pending_beta.bytes()});
  }
  try {
    for (const auto& [m, regions] : copies.groups) m->download_many(regions);
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
  // The blocks come back in the pool's planes, each DeltaNet slot's buffers in its memory.
  CopiesByMemory copies;
  image_.rewind();
  if (pool_) {
    ensure_blocks(length_);
    const auto keep = static_cast<size_t>(blocks_covering(length_));
    add_block_copies(*pool_, std::span(blocks_).first(keep), image_, false, copies);
  }
  for (size_t i = 0; i < deltanet_.size(); ++i) {
    auto& l = deltanet_[i];
    const std::vector<size_t>& sz = deltanet_sizes_[i];
    Buffer* buffers[] = {&l.state, &l.window, &l.work, &l.pending_pre, &l.pending_qkv, &l.pending_g, &l.pending_beta};
    for (size_t b = 0; b < 7; ++b) *buffers[b] = sz[b] ? Buffer(*l.mem, sz[b]) : Buffer();
    copies.add(*l.mem, {l.state.data(), image_.next(sz[0]), sz[0]});
    copies.add(*l.mem, {l.window.data(), image_.next(sz[1]), sz[1]});
  }
  for (const auto& [m, regions] : copies.groups) m->upload_many(regions);
  image_.reset();
  deltanet_sizes_.clear();
  swapped_out_ = false;
}

}  // namespace specserve
