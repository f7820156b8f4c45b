#pragma once
// The step benchmark behind `specserve bench steps --synthetic SHAPE` and `bench steps --model DIR`: the
// three step times DFlash's speed-up is made of (decode, verify, drafter propose; issue "GPU
// performance"), prefill throughput and time to first token per prompt length, the same steps at long
// contexts, the bytes each step must move and the fraction of the measured device-copy bandwidth that
// achieves, the device's bf16 GEMM rate against which prefill's matmuls are held, and the projected
// tokens/s for a given acceptance τ. With fp8 weights kept (`--fp8-weights keep`, the synthetic `-fp8`
// shapes) the bytes are those streamed (one byte an fp8 element plus its scales), and the JSON adds
// bf16_step_weight_bytes and, per decode batch, bf16_bytes / bf16_roofline_ms: the bf16 step's.
//
// Every timed call is a real engine-shaped forward: decode = B sequences × 1 row, verify = B × K rows
// then commit(1) (the rollback a rejected draft costs), propose = B drafter blocks of the trained size
// after appending ceil(τ) context rows per sequence, prefill = a whole prompt in the engine's chunks.
// Greedy argmax on the backend (no logits leave the device). Step times are medians over `iterations`
// calls after 2 warm-up calls; long prompts take fewer (cli/step_bench_long.h says how many).
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/engine_options.h"
#include "model/target_model.h"
#include "spec/dflash_drafter.h"

namespace specserve::cli {

struct StepBenchOptions {
  // Positions a sequence holds before the timed steps. The batch tables (decode_batches,
  // verify_batches) run at the first entry; the long-context table runs one sequence at each entry
  // and divides by the first.
  std::vector<int> contexts{512};
  // Prompt lengths of the prefill table (each prefilled whole, in chunks of prefill_chunk).
  std::vector<int> prefill_lengths{512, 4096, 16384};
  int prefill_chunk = engine::normalised(engine::EngineOptions{}).prefill_chunk;  // the engine's default
  int iterations = 10;
  double tau = 6.5;  // acceptance length for the projection
  std::vector<int> decode_batches{1, 4, 16, 64};
  std::vector<int> verify_ks{2, 4, 8, 16};
  std::vector<int> verify_batches{1, 4, 16};
  // KV-cache bytes the bench may hold at once (target and drafter); a measurement that needs more is
  // skipped with a note. 0: 90 % of what the forward memory has free after the weights (on the CPU,
  // half the RAM).
  int64_t kv_budget_bytes = 0;
};

// `label` names the model in the output (shape name or directory). drafter may be null.
nlohmann::json run_step_bench(TargetModel& target, const spec::DFlashDrafter* drafter, const std::string& label,
                              const StepBenchOptions& options);
// The JSON as aligned, labelled text tables.
std::string format_step_bench(const nlohmann::json& result);

}  // namespace specserve::cli
