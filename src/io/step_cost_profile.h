#pragma once
// The step cost model's coefficients (engine/step_cost_model.h evaluates them) and the profile file
// `specserve bench step-costs` writes them to and `specserve serve --step-cost-profile` reads them from
// (docs/DFLASH.md §13). A profile is keyed by what its times depend on: the model shape (target and
// drafter), the device and the build; a profile of another key is refused, and so is a malformed one,
// with a one-line Error (the caller then calibrates instead).
//
// The file is one JSON object:
//   {"specserve_step_costs": 1, "model": "...", "device": "...", "build": "...",
//    "row_knots": [2, 4, ...], "row_seconds": [...], "plain_knots": [1, 4, ...], "plain_seconds": [...],
//    "sequence_s": ..., "context_s": ..., "row_context_s": ..., "propose_s": ..., "propose_sequence_s": ...,
//    "propose_context_s": ..., "propose_draft_s": ...}
// (plain_knots and plain_seconds together or neither).
#include <string>
#include <string_view>
#include <vector>

namespace specserve {

// A step over S decoding sequences, sequence i holding c_i positions and computing k_i rows (1 decode
// row + its drafts), R = Σ k_i, costs
//   w(R) + sequence_s·S + Σ_i c_i·(context_s + row_context_s·(k_i − 1))
// where w is piecewise linear through (row_knots, row_seconds), extended by its last segment's slope
// (and flat below the first knot) — except a step of plain rows only (every k_i = 1, R = S), which costs
//   d(S) + context_s·Σ_i c_i
// with d piecewise linear the same way through (plain_knots, plain_seconds) when the plain curve is given
// (else the first form). A plain step runs other kernels than a verify of as many rows (the decode
// attention, a hybrid's one-step recurrence, the gemv), so its time is its own curve: on the 27B shape the
// verify form priced a 64-sequence decode 20 % above its measured time. A drafter propose over D
// sequences (D > 0) costs
//   propose_s + propose_sequence_s·D + propose_context_s·Σ_{drafted} c_i + propose_draft_s·Σ_{drafted} γ_i
// (every drafted sequence runs the drafter's whole block; only its γ_i slots reach the lm_head).
struct StepCosts {
  std::vector<double> row_knots;      // extend rows of a step, strictly increasing, >= 1
  std::vector<double> row_seconds;    // w at each knot, non-decreasing, > 0
  std::vector<double> plain_knots;    // sequences of a plain step, strictly increasing, >= 1 (empty: none)
  std::vector<double> plain_seconds;  // d at each knot, non-decreasing, > 0
  double sequence_s = 0;              // per sequence in the step
  double context_s = 0;               // per sequence, per position it holds (its KV read)
  double row_context_s = 0;           // per row past a sequence's first, per position it holds
  double propose_s = 0;               // a drafter propose, whatever it drafts for
  double propose_sequence_s = 0;      // per sequence drafted for
  double propose_context_s = 0;       // per sequence drafted for, per position it holds
  double propose_draft_s = 0;         // per draft: its slot's lm_head row
};

// Throws Error naming the first field out of range (the rules of StepCosts' comments; every number finite
// and >= 0; at most 64 knots).
void check_step_costs(const StepCosts& costs);

struct StepCostProfile {
  std::string model;   // the target and drafter shapes (cli/step_cost_calibration.h)
  std::string device;  // the device's name
  std::string build;   // the build that measured it
  StepCosts costs;
};

inline constexpr int kStepCostProfileVersion = 3;  // 2: propose_draft_s; 3: the plain curve

std::string write_step_cost_profile(const StepCostProfile& profile);
// Throws Error on anything but a profile as written above (unknown or missing keys, wrong types,
// numbers out of range, another version), naming what is wrong.
StepCostProfile parse_step_cost_profile(std::string_view text);
// Throws Error naming the first of model, device, build that differs from the running one.
void check_step_cost_profile_key(const StepCostProfile& profile, std::string_view model, std::string_view device,
                                 std::string_view build);

}  // namespace specserve
