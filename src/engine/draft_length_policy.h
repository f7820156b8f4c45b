#pragma once
// Draft lengths per sequence, per step (docs/DFLASH.md §13.3). Before each propose the engine asks the
// policy how many drafts γ_i ∈ {0..max_i} each decoding sequence's next verify should carry. The policy
// maximises the step's expected committed tokens per second,
//     Σ_i (1 + Σ_{j=1..γ_i} Π_{m=1..j} a_im)  /  (step(γ) + propose(γ)),
// with a_im the sequence's smoothed acceptance at draft position m (engine/acceptance_stats.h) and the
// times from the step cost model (engine/step_cost_model.h): the next forward over every decoding
// sequence's 1 + γ_i rows, and the drafter's propose over the sequences with γ_i > 0 (none: the drafter
// does not run). γ_i = 0 makes the sequence a plain decode row of the same forward. The choice never
// changes a token (docs/DESIGN.md §1): only how many drafts are verified.
//
// Search: three starting points (the best prefix of the increments (i, j) sorted by their expected token
// Π_{m<=j} a_im; every sequence at its most; the best γ common to all), each improved by per-sequence
// coordinate ascent (each γ re-chosen with the others fixed); every candidate is scored exactly, in O(1)
// from running sums, so a step costs O(N·γ_max) scores.
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "engine/acceptance_stats.h"
#include "engine/engine_options.h"
#include "engine/metrics.h"
#include "engine/step_cost_model.h"

namespace specserve::engine {

// One sequence that decodes in the next step.
struct DraftCandidate {
  int max_drafts = 0;          // 0: a decode row that cannot draft (no drafter context, or its last token)
  int min_drafts = 0;          // drafts it gets whatever the score (a probe, below); <= max_drafts
  int64_t context = 0;         // positions it holds
  std::vector<double> accept;  // a_i1..a_i,max_drafts: acceptance at each draft position
};

struct DraftChoice {
  std::vector<int> gamma;  // one per candidate
  double tokens = 0;       // expected committed tokens of the step
  double seconds = 0;      // predicted step + propose seconds
};

DraftChoice choose_draft_lengths(const StepCostModel& costs, std::span<const DraftCandidate> candidates);

// The engine's policy state: the cost model, the engine-wide acceptance (every sequence's prior), and
// the probe schedule. A sequence the policy has kept at γ = 0 for probe_interval steps is given
// kProbeDrafts drafts on the next step whose index is a multiple of probe_interval, so that acceptance
// which has risen is seen again (all such sequences probe in the same step: one propose).
class DraftLengthPolicy {
 public:
  static constexpr int kProbeDrafts = 3;
  static constexpr int64_t kProbeInterval = 32;

  // Adaptive when options.draft_policy says so (its step_costs then required); publishes the cost model's
  // predictions at EngineMetrics::kStepCostPoints.
  DraftLengthPolicy(const EngineOptions& options, EngineMetrics& metrics);
  bool adaptive() const { return model_.has_value(); }
  const StepCostModel& model() const { return *model_; }
  AcceptanceStats& engine_acceptance() { return engine_acceptance_; }
  const AcceptanceStats& engine_acceptance() const { return engine_acceptance_; }

  // Whether a sequence whose acceptance was last seen at step `since` (AcceptanceStats::since_step)
  // probes at step `step`.
  static bool probes(int64_t step, int64_t since);

 private:
  std::optional<StepCostModel> model_;
  AcceptanceStats engine_acceptance_{AcceptanceStats::kEngineDecay, AcceptanceStats::kPriorWeight};
};

}  // namespace specserve::engine
