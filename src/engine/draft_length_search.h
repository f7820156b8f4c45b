#pragma once
// The draft-length search (docs/DFLASH.md §13.3): given each decoding sequence's acceptance per draft
// position and the step cost model, the γ_i ∈ {min_i..max_i} that maximise the step's expected committed
// tokens per second,
//     Σ_i (1 + Σ_{j=1..γ_i} Π_{m=1..j} a_im)  /  (step(γ) + propose(γ)),
// with the times from the step cost model (engine/step_cost_model.h): the next forward over every
// decoding sequence's 1 + γ_i rows, and the drafter's propose over the sequences with γ_i > 0 (none: the
// drafter does not run).
//
// Search: three starting points (the best prefix of the increments (i, j) sorted by their expected token
// Π_{m<=j} a_im; every sequence at its most; the best γ common to all), each improved by per-sequence
// coordinate ascent (each γ re-chosen with the others fixed); every candidate is scored exactly, in O(1)
// from running sums, so a step costs O(N·γ_max) scores. Before it, a bound (min_drafts_are_best, O(N·γ_max)
// arithmetic) settles the common case under load where no sequence's drafts can pay for themselves: the
// search would keep every γ at its least, and is skipped.
#include <cstdint>
#include <span>
#include <vector>

#include "engine/step_cost_model.h"

namespace specserve::engine {

// One sequence that decodes in the next step.
struct DraftCandidate {
  int max_drafts = 0;          // 0: a decode row that cannot draft (no drafter context, or its last token)
  int min_drafts = 0;          // drafts it gets whatever the score (a probe); <= max_drafts
  int64_t context = 0;         // positions it holds
  std::vector<double> accept;  // a_i1..a_i,max_drafts (or more): acceptance at each draft position
};

struct DraftChoice {
  std::vector<int> gamma;    // one per candidate
  double tokens = 0;         // expected committed tokens of the step
  double seconds = 0;        // predicted step + propose seconds (corrected: below)
  double model_seconds = 0;  // the same by the cost model alone
};

// Measured step time over the cost model's prediction, for steps where some sequence drafts and for steps
// of plain rows only. The model is fitted to timings of the forward and the propose alone; what it leaves
// out (host work, the drafter's context hand-off, a propose that overlaps nothing) shows here, and a step
// whose drafts the model says pay but the clock says do not is scored as the clock says.
struct StepCostCorrection {
  double plain = 1, drafting = 1;
};

DraftChoice choose_draft_lengths(const StepCostModel& costs, std::span<const DraftCandidate> candidates,
                                 const StepCostCorrection& correction = {});
// The same into `out` (its gamma's storage reused: no allocation on a step the bound settles). With
// `bound` false the search always runs (tests compare the two).
void choose_draft_lengths(const StepCostModel& costs, std::span<const DraftCandidate> candidates,
                          const StepCostCorrection& correction, DraftChoice& out, bool bound = true);

// True when no assignment γ ≥ min_drafts other than min_drafts itself can score above (1 − 1e-9) times
// its score: an upper bound on every other assignment's score (each sequence's best gain over its least
// against the least it can add to the step's time: the row share's smallest slope over the rows in
// reach, its per-position terms and, for a sequence not drafting at its least, its share of the propose)
// is below the least assignment's. The search then returns min_drafts (it moves only to strictly better
// scores). False says nothing: the search decides.
bool min_drafts_are_best(const StepCostModel& costs, std::span<const DraftCandidate> candidates,
                         const StepCostCorrection& correction);

}  // namespace specserve::engine
