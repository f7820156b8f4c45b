#pragma once
// The step cost model of the draft-length policy (docs/DFLASH.md §13): what one step's target forward
// over decode and verify rows costs, and what a drafter propose costs, as functions of rows, sequences
// and the positions they hold (the form and its coefficients: io/step_cost_profile.h, StepCosts).
//
// The coefficients come from measured step times, fitted by fit_step_costs: at start-up `specserve serve`
// times a few decode, verify and propose steps on the loaded model (cli/step_cost_calibration.h), or
// reads them from a profile `specserve bench step-costs` wrote.
#include <cstdint>
#include <span>
#include <string>

#include "io/step_cost_profile.h"

namespace specserve::engine {

class StepCostModel {
 public:
  // Throws Error on coefficients check_step_costs refuses.
  explicit StepCostModel(StepCosts costs);

  // The rows' share w(R) of a step of R extend rows (io/step_cost_profile.h).
  double row_seconds(double rows) const;
  // The least slope of row_seconds over rows in [from, to] (from <= to): row_seconds(from + r) −
  // row_seconds(from) >= r · min_row_slope(from, from + r) for every r in [0, to − from]. O(knots).
  double min_row_slope(double from, double to) const;
  // A target forward of `rows` extend rows over `sequences` sequences holding `context_sum` positions in
  // all, with `extra_row_context_sum` = Σ_i (k_i − 1)·c_i: plain_seconds when every row is a plain one
  // (rows == sequences), else verify_seconds.
  double step_seconds(double rows, double sequences, double context_sum, double extra_row_context_sum) const;
  // The verify form w(R) + sequence_s·S + ... (io/step_cost_profile.h), whatever the rows.
  double verify_seconds(double rows, double sequences, double context_sum, double extra_row_context_sum) const;
  // A step of plain rows only: the plain curve d(S) + context_s·Σ c_i, or the verify form at R = S
  // when the costs have no plain curve.
  double plain_seconds(double sequences, double context_sum) const;
  // `sequences` sequences of `context` positions with `rows_per_sequence` rows each.
  double uniform_step_seconds(int sequences, int rows_per_sequence, int64_t context) const;
  // A drafter propose for `sequences` sequences holding `context_sum` positions in all, `drafts` drafts
  // in all (0 for none).
  double propose_seconds(double sequences, double context_sum, double drafts) const;

  const StepCosts& costs() const { return costs_; }
  // One line for the start-up log: predicted decode, verify and propose times at a few points.
  std::string describe(int gamma_max) const;

 private:
  StepCosts costs_;
};

// One measured target step: `batch` sequences of `context` positions, `rows_per_sequence` rows each
// (1: decode; the first `extra_rows` sequences one row more), its median seconds.
struct StepTiming {
  int batch = 1;
  int rows_per_sequence = 1;
  int64_t context = 0;
  double seconds = 0;
  int extra_rows = 0;  // < batch
  double rows() const { return double(batch) * rows_per_sequence + extra_rows; }
  bool plain() const { return rows_per_sequence == 1 && extra_rows == 0; }
  // Σ_i (k_i − 1)·c_i.
  double extra_row_context_sum() const {
    return (double(batch) * (rows_per_sequence - 1) + extra_rows) * double(context);
  }
};
// One measured drafter propose over `batch` sequences of `context` positions, `slots` drafts each.
struct ProposeTiming {
  int batch = 1;
  int64_t context = 0;
  double seconds = 0;
  int slots = 1;
};

// Least-squares fit of StepCosts to the timings, each weighted by 1/seconds² (relative error). When both
// plain steps (one row a sequence) and verify steps were timed, the plain ones fit the plain curve d (its
// knots the batch sizes measured) and the verify ones w (its knots their row counts); with one kind only,
// w fits them all and there is no plain curve. The per-position term is shared; the other coefficients
// are kept >= 0, w and d non-decreasing. Identifiable when some verify row count was measured with two
// batch sizes and some step at two contexts (otherwise the per-sequence / per-position terms come out 0
// and the curves absorb them). Throws Error when `steps` is empty or a time is not positive.
StepCosts fit_step_costs(std::span<const StepTiming> steps, std::span<const ProposeTiming> proposes);

}  // namespace specserve::engine
