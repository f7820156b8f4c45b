// DeltaNet snapshots for the prefix cache (docs/DESIGN.md §5): every DeltaNet layer's committed recurrent
// state and conv window, copied into blocks of the KV pool (so the snapshot is memory the KV budget
// already counts) and back. The bytes are laid out layer by layer, state then window, running across
// the blocks in order; a copy is cut where a block ends.
#include <algorithm>

#include "core/error.h"
#include "model/deltanet_snapshot.h"
#include "model/layers.h"

namespace specserve {

namespace {

// The copies between the snapshot's regions (in order) and the blocks: to the blocks when `save`.
std::vector<CopyRegion> block_copies(std::span<const std::pair<void*, size_t>> regions, std::span<void* const> blocks,
                                     size_t block_bytes, bool save) {
  std::vector<CopyRegion> copies;
  size_t block = 0, at = 0;
  for (const auto& [data, bytes] : regions) {
    size_t done = 0;
    while (done < bytes) {
      SS_CHECK(block < blocks.size(), "snapshot: {} blocks are too few", blocks.size());
      const size_t n = std::min(bytes - done, block_bytes - at);
      char* b = static_cast<char*>(blocks[block]) + at;
      char* r = static_cast<char*>(data) + done;
      copies.push_back(save ? CopyRegion{b, r, n} : CopyRegion{r, b, n});
      done += n;
      at += n;
      if (at == block_bytes) {
        ++block;
        at = 0;
      }
    }
  }
  return copies;
}

struct LayerBytes {
  size_t state, window;
};

LayerBytes layer_bytes(const GdnDims& d) {
  return {static_cast<size_t>(d.state_floats()) * 4,
          static_cast<size_t>(d.conv_kernel - 1) * static_cast<size_t>(d.conv_dim()) * 4};
}

std::vector<std::pair<void*, size_t>> snapshot_regions(SequenceState& s, LayerBytes b) {
  SS_CHECK(s.pending() == 0 && !s.swapped_out(), "snapshot: the sequence has pending rows or is swapped out");
  std::vector<std::pair<void*, size_t>> regions;
  for (auto& l : ModelInternals::deltanets(s)) {
    SS_CHECK(l.state.bytes() >= b.state && l.window.bytes() >= b.window, "snapshot: DeltaNet buffers too small");
    regions.emplace_back(l.state.data(), b.state);
    regions.emplace_back(l.window.data(), b.window);
  }
  return regions;
}

}  // namespace

size_t deltanet_snapshot_bytes(const GdnDims& dims, int layers) {
  if (layers == 0) return 0;
  const LayerBytes b = layer_bytes(dims);
  return static_cast<size_t>(layers) * (b.state + b.window);
}

void save_deltanet_snapshot(const Memory& mem, const GdnDims& dims, const SequenceState& s,
                            std::span<void* const> blocks, size_t block_bytes) {
  const auto regions = snapshot_regions(const_cast<SequenceState&>(s), layer_bytes(dims));
  mem.copy_many(block_copies(regions, blocks, block_bytes, true));
}

void restore_deltanet_snapshot(const Memory& mem, const GdnDims& dims, std::span<void* const> blocks,
                               size_t block_bytes, SequenceState& s) {
  const auto regions = snapshot_regions(s, layer_bytes(dims));
  mem.copy_many(block_copies(regions, blocks, block_bytes, false));
}

}  // namespace specserve
