#pragma once
// Observed acceptance per draft position, for the draft-length policy (engine/draft_length_policy.h,
// docs/DFLASH.md §13.2). Position j's rate a_j is P(draft j accepted | drafts 1..j−1 accepted): a verify
// of γ drafts that accepted A is a success at positions 1..A and, when A < γ, a failure at A + 1; it says
// nothing directly about positions past A + 1.
//
// Counts are exponentially smoothed: every verify first multiplies every position's counts by `decay`, so
// evidence ages with the verifies since it was seen. A sequence's statistics (observed with the engine
// step) also age by `decay` for every step it spent as a plain decode row: a sequence the policy stopped
// drafting for comes back to the engine-wide rates instead of keeping the unlucky verifies that stopped it.
// Each position's rate is read against a prior worth `prior_weight` observations that comes from the
// position before it:
//     a_j = (accepted_j + w·π_j) / (trials_j + w),   π_j = a_{j−1}·ρ_j,   a_0 = 1,
// with ρ_j the prior statistics' (the engine-wide ones) ratio e_j / e_{j−1} (e_0 = 1), capped at 1. So
//   - a position never tried inherits the rate of the deepest one tried, shaped by how the engine-wide
//     rate falls from there: a verify whose drafts were all accepted raises every position beyond it;
//   - a sequence with no evidence of its own reads exactly the engine-wide rates e_1, e_2, …;
//   - a failure at position j lowers j and, through the chain, every position past it.
// The engine-wide statistics are the same class read without a prior: e_j against e_{j−1}, e_1 against
// kDefaultPrior (a geometric prior).
#include <array>
#include <cstdint>
#include <span>

namespace specserve::engine {

class AcceptanceStats {
 public:
  static constexpr int kMaxPositions = 32;
  // The rate of draft position 1 when nothing has been observed anywhere (and, through the chain, of
  // every position after it).
  static constexpr double kDefaultPrior = 0.6;
  // A sequence's smoothing (about its last five verifies weigh) and the engine-wide one (about the last
  // hundred), and the weight of the prior in observations (docs/DFLASH.md §13.2).
  static constexpr double kSequenceDecay = 0.8;
  static constexpr double kEngineDecay = 0.99;
  static constexpr double kPriorWeight = 2.0;

  explicit AcceptanceStats(double decay = kSequenceDecay, double prior_weight = kPriorWeight)
      : decay_(decay), prior_weight_(prior_weight) {}

  // A verify of `drafts` drafts that accepted `accepted` of them (the engine-wide statistics: they age
  // per verify only).
  void observe(int drafts, int accepted) { observe(drafts, accepted, -1); }
  // The same for a sequence, verified in engine step `step`: the steps since its previous verify age its
  // counts first; since_step() becomes `step`.
  void observe(int drafts, int accepted, int64_t step);
  // a_1..a_n into `out` (n = out.size(); positions past kMaxPositions repeat the last), read against the
  // prior statistics' rates `prior` (their a_1..; positions past its end repeat its last; empty: the
  // geometric default, kDefaultPrior at every position), at engine step `now` (the counts aged by the
  // steps since the latest verify; -1: not aged). O(n).
  void rates(std::span<double> out, std::span<const double> prior = {}, int64_t now = -1) const;
  // P(draft `position` accepted | drafts before it accepted), position 1-based, against `prior`'s rates
  // (or the default when prior is null). O(position); for tests and one-off reads.
  double rate(int position, const AcceptanceStats* prior = nullptr) const;
  // Verifies observed so far.
  int64_t verifies() const { return verifies_; }
  // The smoothed counts of drafts tried and accepted at `position` (1-based; 0 outside
  // 1..kMaxPositions), as the latest verify left them (not aged by steps since, no prior).
  double trials_at(int position) const {
    return position >= 1 && position <= kMaxPositions ? trials_[static_cast<size_t>(position - 1)] : 0.0;
  }
  double accepted_at(int position) const {
    return position >= 1 && position <= kMaxPositions ? accepted_[static_cast<size_t>(position - 1)] : 0.0;
  }

  // The probe schedule's clock (engine/draft_length_policy.h) and the ageing's: the engine step of the
  // latest verify, or of the first step the sequence could have drafted; -1 before either.
  int64_t since_step() const { return since_step_; }
  void mark_first_step(int64_t step) {
    if (since_step_ < 0) since_step_ = step;
  }
  // The probe schedule's back-off: probes in a row that did not bring the sequence back to drafting.
  int quiet_probes() const { return quiet_probes_; }
  void set_quiet_probes(int n) { quiet_probes_ = n; }

 private:
  // The ageing factor of `steps` steps without a verify since the latest one.
  double idle_factor(int64_t steps) const;

  double decay_, prior_weight_;
  std::array<double, kMaxPositions> trials_{}, accepted_{};
  int64_t verifies_ = 0;
  int64_t since_step_ = -1;
  int quiet_probes_ = 0;
};

}  // namespace specserve::engine
