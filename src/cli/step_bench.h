#pragma once
// The step benchmark behind `specserve bench steps --synthetic SHAPE` and `bench steps --model DIR`: the
// three step times DFlash's speed-up is made of (decode, verify, drafter propose; issue "GPU
// performance"), prefill throughput, the bytes each step must move and the fraction of the measured
// device-copy bandwidth that achieves, and the projected tokens/s for a given acceptance τ.
//
// Every timed call is a real engine-shaped forward: decode = B sequences × 1 row, verify = B × K rows
// then commit(1) (the rollback a rejected draft costs), propose = B drafter blocks of the trained size
// after appending ceil(τ) context rows per sequence. Greedy argmax on the backend (no logits leave the
// device). Times are medians over `iterations` calls after 2 warm-up calls.
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "model/target_model.h"
#include "spec/dflash_drafter.h"

namespace specserve::cli {

struct StepBenchOptions {
  int context = 512;   // positions each sequence holds before the timed steps
  int prefill = 2048;  // prompt length of the prefill measurement (chunks of 512)
  int iterations = 10;
  double tau = 6.5;  // acceptance length for the projection
  std::vector<int> decode_batches{1, 4, 16, 64};
  std::vector<int> verify_ks{2, 4, 8, 16};
  std::vector<int> verify_batches{1, 4, 16};
};

// `label` names the model in the output (shape name or directory). drafter may be null.
nlohmann::json run_step_bench(TargetModel& target, const spec::DFlashDrafter* drafter, const std::string& label,
                              const StepBenchOptions& options);
// The JSON as aligned text tables.
std::string format_step_bench(const nlohmann::json& result);

}  // namespace specserve::cli
