#pragma once
// DeltaNet snapshots for the prefix cache (docs/DESIGN.md §5): a copy of every DeltaNet layer's committed
// recurrent state and conv window of a sequence (no pending rows), kept in blocks of the KV pool and
// copied back into a new sequence bit for bit. TargetModel::save_snapshot / restore_snapshot call these.
#include <cstddef>
#include <span>

#include "backend/memory.h"
#include "backend/ops.h"
#include "model/sequence_state.h"

namespace specserve {

// Bytes of one snapshot of `layers` DeltaNet layers of shape `dims`.
size_t deltanet_snapshot_bytes(const GdnDims& dims, int layers);
// Copies (in `mem`, one copy_many) the state and window of every layer, in layer order, across `blocks`
// of `block_bytes` each.
void save_deltanet_snapshot(const Memory& mem, const GdnDims& dims, const SequenceState& s,
                            std::span<void* const> blocks, size_t block_bytes);
void restore_deltanet_snapshot(const Memory& mem, const GdnDims& dims, std::span<void* const> blocks,
                               size_t block_bytes, SequenceState& s);

}  // namespace specserve
