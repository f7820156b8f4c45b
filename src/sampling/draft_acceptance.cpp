#include "sampling/draft_acceptance.h"

#include <algorithm>

#include "core/error.h"

namespace specserve::sampling {
namespace {

// Inverse CDF over weight(i) for i in [0, n), ascending; n if the mass is zero.
template <typename Weight>
size_t inverse_cdf(size_t n, double u, Weight weight) {
  double total = 0.0;
  for (size_t i = 0; i < n; ++i) total += weight(i);
  if (!(total > 0.0)) return n;
  const double target = u * total;
  double cum = 0.0;
  size_t last_positive = n;
  for (size_t i = 0; i < n; ++i) {
    const double w = weight(i);
    if (w <= 0.0) continue;
    last_positive = i;
    cum += w;
    if (cum > target) return i;
  }
  return last_positive;  // rounding left the target at the very top of the mass
}

}  // namespace

TokenId sample_from(std::span<const float> probs, double u) {
  const size_t i = inverse_cdf(probs.size(), u, [&](size_t k) { return std::max(0.0, double(probs[k])); });
  SS_CHECK(i < probs.size(), "sampler: cannot sample from a distribution with zero mass");
  return static_cast<TokenId>(i);
}

bool accept_draft(float p_d, float q_d, double u) { return u * double(q_d) < double(p_d); }

TokenId sample_residual(std::span<const float> p, std::span<const float> q, double u) {
  SS_CHECK(p.size() == q.size(), "sampler: residual of distributions of sizes {} and {}", p.size(), q.size());
  const size_t i = inverse_cdf(p.size(), u, [&](size_t k) { return std::max(0.0, double(p[k]) - double(q[k])); });
  return i < p.size() ? static_cast<TokenId>(i) : sample_from(p, u);
}

}  // namespace specserve::sampling
