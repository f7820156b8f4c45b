#pragma once
// What the parts of the step benchmark share (cli/step_bench.h): the clock and medians, random
// prompts, a sequence filled by prefill, and the KV budget every measurement is checked against.
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "model/target_model.h"
#include "spec/dflash_drafter.h"

namespace specserve::cli::step_bench {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0);

// The device the target runs on: the GPU's name, or "cpu".
std::string device_name(const TargetModel& target);

// Median seconds of `iterations` calls of fn after `warmups` untimed calls.
double median_seconds(int iterations, const std::function<void()>& fn, int warmups = 2);

std::vector<int32_t> random_tokens(size_t n, std::mt19937& rng, int64_t vocab);

// One more call of fn inside a profiler range (cudaProfilerStart/Stop: what scripts/gpu_profile.sh and
// scripts/gpu_trace.sh record) when SPECSERVE_PROFILE_STEP names `kind` ("decode", "verify", "propose",
// "prefill") and the target runs on CUDA; otherwise nothing.
void profile_once(const char* kind, const TargetModel& target, const std::function<void()>& fn);

// Prefills `tokens` into `seq` (at its current length) in chunks of `chunk`, wanting no logits.
void prefill(TargetModel& target, SequenceState& seq, std::span<const int32_t> tokens, int chunk);

// Appends `rows` context rows to a drafter sequence, `features.rows` at a time (each [n, feature_width]
// in the target's forward memory), projecting them into its cache as they arrive.
void fill_drafter_context(const spec::DFlashDrafter& drafter, spec::DrafterSequence& seq, int64_t rows,
                          const TensorView& features);

// KV blocks (of kKvBlockSize positions) a measurement holds at its peak, and its sequences.
struct KvDemand {
  int64_t target_blocks = 0;
  int64_t drafter_blocks = 0;  // 0 without a drafter
  int sequences = 1;
  // `sequences` sequences of `positions` positions each (the drafter's one block longer: its block's
  // scratch positions), with or without a drafter beside the target.
  static KvDemand of(int64_t positions, int sequences, bool with_drafter);
};

// The KV-cache bytes the bench may hold at once, and the check a measurement passes before it runs.
class KvBudget {
 public:
  KvBudget(const TargetModel& target, const spec::DFlashDrafter* drafter, int64_t budget_bytes);
  double bytes() const { return bytes_; }
  // Bytes of the demand's KV blocks and its sequences' DeltaNet state.
  double need(const KvDemand& demand) const;
  // Reserves the demand in the model's pools (so no allocation lands inside a timed call) and returns
  // nothing; or returns the note saying why the measurement is skipped (over the budget, or the
  // memory refused the reservation).
  std::optional<std::string> reserve(TargetModel& target, const spec::DFlashDrafter* drafter,
                                     const KvDemand& demand) const;

 private:
  const TargetModel* target_;
  const spec::DFlashDrafter* drafter_;
  double bytes_ = 0;
};

}  // namespace specserve::cli::step_bench
