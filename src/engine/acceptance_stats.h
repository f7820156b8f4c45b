#pragma once
// Observed acceptance per draft position, for the draft-length policy (engine/draft_length_policy.h,
// docs/DFLASH.md §13.2). Position j's rate is P(draft j accepted | drafts 1..j−1 accepted): a verify of
// γ drafts that accepted A is a success at positions 1..A and, when A < γ, a failure at A + 1; it says
// nothing about positions past A + 1. Counts are exponentially smoothed (each observation of a position
// first multiplies its counts by `decay`), and a rate is read against a prior worth `prior_weight`
// observations, so a new sequence starts at the prior and moves to its own acceptance within a few
// verifies. The engine keeps one for every sequence, with the whole engine's as their prior.
#include <array>
#include <cstdint>

namespace specserve::engine {

class AcceptanceStats {
 public:
  static constexpr int kMaxPositions = 32;
  // What a rate is read against when nothing has been observed anywhere.
  static constexpr double kDefaultPrior = 0.6;

  explicit AcceptanceStats(double decay = 0.8, double prior_weight = 2.0)
      : decay_(decay), prior_weight_(prior_weight) {}

  // A verify of `drafts` drafts that accepted `accepted` of them.
  void observe(int drafts, int accepted);
  // P(draft `position` accepted | drafts before it accepted), position 1-based; against `prior`'s rate
  // at that position (or kDefaultPrior when prior is null).
  double rate(int position, const AcceptanceStats* prior = nullptr) const;
  // Verifies observed so far.
  int64_t verifies() const { return verifies_; }

  // The probe schedule's clock (engine/draft_length_policy.h): the engine step of the latest verify, or
  // of the first step the sequence could have drafted; -1 before either.
  int64_t since_step() const { return since_step_; }
  void mark_step(int64_t step) { since_step_ = step; }
  void mark_first_step(int64_t step) {
    if (since_step_ < 0) since_step_ = step;
  }

 private:
  double decay_, prior_weight_;
  std::array<double, kMaxPositions> trials_{}, accepted_{};
  int64_t verifies_ = 0;
  int64_t since_step_ = -1;
};

}  // namespace specserve::engine
