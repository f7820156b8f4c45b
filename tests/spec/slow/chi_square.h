#pragma once
// Chi-square homogeneity test of two samples of categorical outcomes, for the distribution tests.
#include <cmath>
#include <cstdint>
#include <map>
#include <vector>

namespace specserve::spec::testing {

// Regularised upper incomplete gamma Q(a, x) = Γ(a, x) / Γ(a) (series for x < a + 1, continued
// fraction otherwise; Numerical Recipes' gammq).
inline double gamma_q(double a, double x) {
  if (x <= 0) return 1.0;
  const double lg = std::lgamma(a);
  if (x < a + 1) {
    double sum = 1.0 / a, term = sum;
    for (int n = 1; n < 10000 && std::fabs(term) > std::fabs(sum) * 1e-15; ++n) {
      term *= x / (a + n);
      sum += term;
    }
    return 1.0 - sum * std::exp(-x + a * std::log(x) - lg);
  }
  double b = x + 1 - a, c = 1e300, d = 1 / b, h = d;
  for (int i = 1; i < 10000; ++i) {
    const double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (std::fabs(d) < 1e-300) d = 1e-300;
    c = b + an / c;
    if (std::fabs(c) < 1e-300) c = 1e-300;
    d = 1 / d;
    const double del = d * c;
    h *= del;
    if (std::fabs(del - 1) < 1e-15) break;
  }
  return std::exp(-x + a * std::log(x) - lg) * h;
}

struct Homogeneity {
  double chi2 = 0;
  int df = 0;
  double p = 1;
  int categories = 0;  // after pooling the rare ones
};

// Samples a and b (same size n) of outcomes; categories whose pooled count is below `min_pooled`
// (an expected count below min_pooled / 2 per sample) are merged into one.
template <typename Key>
Homogeneity homogeneity(const std::map<Key, int64_t>& a, const std::map<Key, int64_t>& b, int64_t min_pooled = 10) {
  std::map<Key, std::pair<int64_t, int64_t>> both;
  for (const auto& [k, c] : a) both[k].first += c;
  for (const auto& [k, c] : b) both[k].second += c;
  std::vector<std::pair<int64_t, int64_t>> cells;
  std::pair<int64_t, int64_t> rare{0, 0};
  int64_t na = 0, nb = 0;
  for (const auto& [k, c] : both) {
    na += c.first;
    nb += c.second;
    if (c.first + c.second < min_pooled) {
      rare.first += c.first;
      rare.second += c.second;
    } else {
      cells.push_back(c);
    }
  }
  if (rare.first + rare.second > 0) cells.push_back(rare);
  Homogeneity h;
  const double n = double(na + nb);
  for (const auto& [ca, cb] : cells) {
    const double total = double(ca + cb);
    const double ea = total * double(na) / n, eb = total * double(nb) / n;
    h.chi2 += (ca - ea) * (ca - ea) / ea + (cb - eb) * (cb - eb) / eb;
  }
  h.categories = static_cast<int>(cells.size());
  h.df = h.categories - 1;
  h.p = h.df > 0 ? gamma_q(h.df / 2.0, h.chi2 / 2.0) : 1.0;
  return h;
}

}  // namespace specserve::spec::testing
