#pragma once
// The step cost model's coefficients for the loaded target and drafter (docs/DFLASH.md §13.1): timed on
// the device with the step benchmark's steps (cli/step_timer.h) and fitted (engine/step_cost_model.h),
// or read from a profile `specserve bench step-costs` wrote (io/step_cost_profile.h).
//
// What is timed (each the median of a few calls after a warm-up): decode and verify steps of B sequences
// × K rows at a short context for B in 1, 4, 16, 64 and K in 1, 2, 4, 8, γ_max + 1 (B up to --max-seqs;
// decode also at 128 and 256 sequences), a few of them again at a long context, steps of exactly 33 and
// 65 rows at the short context (one past the gemv and mid matmul kernels' row ranges, where the row share
// jumps: CalibrationPlan::edges), and drafter proposes at both contexts. On the CPU: 1 and 2 sequences, K
// in 1 and γ_max + 1, one call each, at 32 and 160 positions (enough for the policy's shape, cheap enough
// for a start-up).
#include <string>
#include <utility>
#include <vector>

#include "engine/step_cost_model.h"
#include "model/target_model.h"
#include "spec/dflash_drafter.h"

namespace specserve::cli {

// One edge step of the plan: `batch` sequences of `k` rows, the first `extra` (< batch) of them k + 1.
struct CalibrationEdge {
  int batch = 1, k = 1, extra = 0;
  int64_t rows() const { return int64_t{batch} * k + extra; }
  bool operator==(const CalibrationEdge&) const = default;
};

struct CalibrationPlan {
  std::vector<int> batches;         // verify and propose batch sizes
  std::vector<int> decode_batches;  // further decode-only batch sizes
  std::vector<int> ks;              // rows per sequence
  // Steps (batch, rows per sequence, extra) of exactly one row more than a matmul kernel's range or its row tile
  // (backend/matmul_choice.h: kGemvMaxRows, kMidMaxRows, kWgmmaSerialTile, kWgmmaTmaMaxRows), at the
  // short context. The row share jumps there: the 8B shape on an H200 took 10.1 ms at 64 rows, 16.8 ms at
  // 76 (a probe's verify at 64 sequences), and from 129 rows the verify kernel runs a second 128-row tile.
  // The fit's knots are the row counts measured, so without one on each side of the jump the model
  // interpolated across it and priced such a step at a fraction of its cost (16 sequences of ~9 rows
  // as little more than 16 of 8). The fewest sequences that make the row count with at most gamma_max + 1
  // rows each: the first `extra` of them one row more than the others.
  std::vector<CalibrationEdge> edges;
  int short_context = 256, long_context = 4096;
  // On a device two untimed calls of each step: the first launches its kernels directly, the second
  // captures its CUDA graphs (backend/cuda/step_graphs.h), so every timed call replays them as the engine's
  // steady state does. With one, a timed call could hold a capture: the tiny shape's table then had a
  // 1 x 2-row verify at 0.58 ms and 1 x 4 at 0.32, and a 16-sequence decode priced 1.6x its engine time.
  int iterations = 3, warmups = 2;
};

// The plan for a target on `backend` serving up to max_seqs sequences with drafts of at most gamma_max.
CalibrationPlan calibration_plan(std::string_view backend, int max_seqs, int gamma_max);

struct Calibration {
  StepCosts costs;
  std::vector<engine::StepTiming> steps;
  std::vector<engine::ProposeTiming> proposes;
  double seconds = 0;  // the calibration's wall time
};

// Times the plan's steps and fits them. The target's and drafter's pools must hold the blocks of
// max(batches) sequences at the short context plus one at the long context (kv_blocks_needed).
Calibration calibrate_step_costs(TargetModel& target, const spec::DFlashDrafter& drafter, const CalibrationPlan& plan,
                                 int prefill_chunk);
// KV blocks (target; the drafter's are as many plus one per sequence) the plan's sequences hold at once.
int64_t kv_blocks_needed(const CalibrationPlan& plan, int prefill_chunk);

// The profile key (io/step_cost_profile.h): the target and drafter shapes with their dtypes; the device;
// the build (this executable's size and modification time: any rebuild measures again).
std::string step_cost_model_key(const TargetModel& target, const spec::DFlashDrafter& drafter);
std::string step_cost_device(const TargetModel& target);
std::string step_cost_build();

// For `serve` with the adaptive draft policy: the profile at `profile_path` when given and valid for this
// model, device and build; otherwise (a warning says why) calibrated now on the loaded model, within
// `kv_blocks` blocks. Logs the model either way.
StepCosts serving_step_costs(TargetModel& target, const spec::DFlashDrafter& drafter, int max_seqs, int gamma_max,
                             int64_t kv_blocks, int prefill_chunk, const std::string& profile_path);

}  // namespace specserve::cli
