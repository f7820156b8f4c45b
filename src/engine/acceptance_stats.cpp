#include "engine/acceptance_stats.h"

#include <algorithm>

namespace specserve::engine {

void AcceptanceStats::observe(int drafts, int accepted) {
  if (drafts <= 0) return;
  ++verifies_;
  drafts = std::min(drafts, kMaxPositions);
  accepted = std::clamp(accepted, 0, drafts);
  const int seen = std::min(drafts, accepted + 1);  // positions 1..seen were tried
  for (int j = 0; j < seen; ++j) {
    trials_[j] = trials_[j] * decay_ + 1;
    accepted_[j] = accepted_[j] * decay_ + (j < accepted ? 1 : 0);
  }
}

double AcceptanceStats::rate(int position, const AcceptanceStats* prior) const {
  if (position < 1) return 1;
  const int j = std::min(position, kMaxPositions) - 1;
  const double p = prior ? prior->rate(position, nullptr) : kDefaultPrior;
  return (accepted_[j] + prior_weight_ * p) / (trials_[j] + prior_weight_);
}

}  // namespace specserve::engine
