#pragma once
// DeltaNet snapshots for the prefix cache (docs/DESIGN.md §5): a copy of every DeltaNet layer's committed
// recurrent state and conv window of a sequence (no pending rows), kept in blocks of the KV pool and
// copied back into a new sequence bit for bit. TargetModel::save_snapshot / restore_snapshot call these.
#include <cstddef>
#include <span>
#include <vector>

#include "backend/memory.h"
#include "backend/ops.h"
#include "model/sequence_state.h"

namespace specserve {

// Bytes of one snapshot of `layers` DeltaNet layers of shape `dims`.
size_t deltanet_snapshot_bytes(const GdnDims& dims, int layers);

// One plane of a snapshot's blocks (model/kv_cache.h): the sequence's DeltaNet slots [first_slot, first_slot +
// slots) go, state then window slot by slot, across `blocks` (this plane's address of each snapshot block,
// `block_bytes` each), copied in `mem`. The unsharded model has one plane holding every slot; a sharded one
// a plane per rank holding the rank's slots, in the rank's memory.
struct SnapshotPlane {
  const Memory* mem = nullptr;
  size_t first_slot = 0, slots = 0;
  std::vector<void*> blocks;
};
// Copies (one copy_many a plane) the snapshot's slots into, or back from, the planes' blocks.
void save_deltanet_snapshot(const GdnDims& dims, const SequenceState& s, std::span<const SnapshotPlane> planes,
                            size_t block_bytes);
void restore_deltanet_snapshot(const GdnDims& dims, std::span<const SnapshotPlane> planes, size_t block_bytes,
                               SequenceState& s);

}  // namespace specserve
