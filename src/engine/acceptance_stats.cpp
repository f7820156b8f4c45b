#include "engine/acceptance_stats.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace specserve::engine {

double AcceptanceStats::idle_factor(int64_t steps) const {
  if (steps <= 0 || verifies_ == 0) return 1;
  return std::pow(decay_, static_cast<double>(std::min<int64_t>(steps, 4096)));
}

void AcceptanceStats::observe(int drafts, int accepted, int64_t step) {
  if (drafts <= 0) return;
  const double age = decay_ * (step >= 0 && since_step_ >= 0 ? idle_factor(step - since_step_ - 1) : 1.0);
  ++verifies_;
  if (step >= 0) since_step_ = step;
  drafts = std::min(drafts, kMaxPositions);
  accepted = std::clamp(accepted, 0, drafts);
  const int seen = std::min(drafts, accepted + 1);  // positions 1..seen were tried
  for (int j = 0; j < kMaxPositions; ++j) {
    trials_[j] = trials_[j] * age + (j < seen ? 1 : 0);
    accepted_[j] = accepted_[j] * age + (j < accepted ? 1 : 0);
  }
}

void AcceptanceStats::rates(std::span<double> out, std::span<const double> prior, int64_t now) const {
  const double age = now >= 0 && since_step_ >= 0 ? idle_factor(now - since_step_) : 1.0;
  auto prior_at = [&](size_t j) {  // e_{j+1}
    if (prior.empty()) return kDefaultPrior;
    return std::clamp(prior[std::min(j, prior.size() - 1)], 0.0, 1.0);
  };
  double a = 1, e = 1;  // a_{j−1}, e_{j−1}
  for (size_t j = 0; j < out.size(); ++j) {
    if (j >= static_cast<size_t>(kMaxPositions)) {
      out[j] = a;
      continue;
    }
    const double e_j = prior_at(j);
    const double rho = e > 0 ? std::min(1.0, e_j / e) : 1.0;
    const double pi = a * rho;
    a = (age * accepted_[j] + prior_weight_ * pi) / (age * trials_[j] + prior_weight_);
    e = e_j;
    out[j] = a;
  }
}

double AcceptanceStats::rate(int position, const AcceptanceStats* prior) const {
  if (position < 1) return 1;
  const auto n = static_cast<size_t>(position);
  std::vector<double> p;
  if (prior) {
    p.resize(n);
    prior->rates(p);
  }
  std::vector<double> r(n);
  rates(r, p);
  return r.back();
}

}  // namespace specserve::engine
