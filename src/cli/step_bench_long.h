#pragma once
// The long-prompt and long-context parts of the step benchmark (cli/step_bench.h):
//   prefill   each prompt length prefilled whole in the engine's chunks, the last chunk asking for its
//             argmax, timed until that first token id is on the host (time to first token); the
//             effective matmul TFLOP/s and the causal-attention FLOPs against the device's bf16 GEMM rate
//   contexts  one sequence at each context length (filled by prefill): decode, verify with the largest
//             K, drafter propose, each over the first entry's; the KV bytes a decode row reads and that
//             read's bandwidth against the copy bandwidth
//   matmul_prefill  Ops::matmul_prefill alone on the MLP up-projection's shape, against the GEMM rate
// Lengths whose KV does not fit the budget (step_bench_common.h: KvBudget) are skipped with a note.
#include <nlohmann/json.hpp>

#include <optional>
#include <random>

#include "cli/device_gemm_rate.h"
#include "cli/step_bench.h"
#include "cli/step_bench_common.h"

namespace specserve::cli::step_bench {

// Timed prefills of a `tokens`-token prompt: `iterations` up to 8,192 tokens, then fewer in proportion
// (iterations × 8192 / tokens, at least 1): a 65,536-token prompt is timed once.
int prefill_iterations(int iterations, int tokens);

nlohmann::json measure_prefill_lengths(TargetModel& target, const StepBenchOptions& options, const KvBudget& budget,
                                       const std::optional<DeviceGemmRate>& gemm, std::mt19937& rng);

nlohmann::json measure_contexts(TargetModel& target, const spec::DFlashDrafter* drafter,
                                const StepBenchOptions& options, const KvBudget& budget, double copy_bandwidth,
                                std::mt19937& rng);

// Rows of x: 4,096 on a device, 256 on the CPU (where 4,096 rows of a real shape take minutes).
nlohmann::json measure_matmul_prefill(TargetModel& target, int iterations, const std::optional<DeviceGemmRate>& gemm);

}  // namespace specserve::cli::step_bench
