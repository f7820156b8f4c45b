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

// The state and window of the sequence's DeltaNet slots [first, first + count).
std::vector<std::pair<void*, size_t>> snapshot_regions(SequenceState& s, LayerBytes b, size_t first, size_t count) {
  SS_CHECK(s.pending() == 0 && !s.swapped_out(), "snapshot: the sequence has pending rows or is swapped out");
  auto& layers = ModelInternals::deltanets(s);
  SS_CHECK(first + count <= layers.size(), "snapshot: slots [{}, {}) of {}", first, first + count, layers.size());
  std::vector<std::pair<void*, size_t>> regions;
  for (size_t i = first; i < first + count; ++i) {
    auto& l = layers[i];
    SS_CHECK(l.state.bytes() >= b.state && l.window.bytes() >= b.window, "snapshot: DeltaNet buffers too small");
    regions.emplace_back(l.state.data(), b.state);
    regions.emplace_back(l.window.data(), b.window);
  }
  return regions;
}

void copy_planes(const GdnDims& dims, SequenceState& s, std::span<const SnapshotPlane> planes, size_t block_bytes,
                 bool save) {
  for (const SnapshotPlane& p : planes) {
    const auto regions = snapshot_regions(s, layer_bytes(dims), p.first_slot, p.slots);
    p.mem->copy_many(block_copies(regions, p.blocks, block_bytes, save));
  }
}

}  // namespace

size_t deltanet_snapshot_bytes(const GdnDims& dims, int layers) {
  if (layers == 0) return 0;
  const LayerBytes b = layer_bytes(dims);
  return static_cast<size_t>(layers) * (b.state + b.window);
}

void save_deltanet_snapshot(const GdnDims& dims, const SequenceState& s, std::span<const SnapshotPlane> planes,
                            size_t block_bytes) {
  copy_planes(dims, const_cast<SequenceState&>(s), planes, block_bytes, true);
}

void restore_deltanet_snapshot(const GdnDims& dims, std::span<const SnapshotPlane> planes, size_t block_bytes,
                               SequenceState& s) {
  copy_planes(dims, s, planes, block_bytes, false);
}

}  // namespace specserve
