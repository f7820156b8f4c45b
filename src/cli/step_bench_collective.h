#pragma once
// `bench steps` on a sharded target (`--tensor-parallel N`): what the collective costs a decode step. For each
// decode batch B, the collective alone at a forward's shapes — 2 × layers + 1 all_reduce_sum calls of
// [B, hidden] (the embedding, each mixer and MLP) and one all_gather_columns of the ranks' [B, vocab / N]
// logits — timed back to back (the median of `iterations` runs, each ending in a wait for the device), and
// its share of that batch's measured decode step, each rank's buffers in its memory as the sharded forward's. On
// the CPU simulation and on one GPU this prices the reduction's arithmetic and copies; on several GPUs (NCCL),
// the transfers too.
#include <nlohmann/json.hpp>

#include <string>

#include "cli/step_bench.h"

namespace specserve::cli::step_bench {

// Where the ranks are: "one memory" (every rank on one GPU), "N GPUs", or "host memories of their own" (the CPU
// simulation); "" when unsharded.
std::string placement_label(const TargetModel& target);
// `decode` is the step bench's decode table (its "batch" and "ms" entries); an empty array when the target is
// unsharded.
nlohmann::json measure_collective(const TargetModel& target, const StepBenchOptions& o, const nlohmann::json& decode);

}  // namespace specserve::cli::step_bench
