#include "engine/step_cost_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"

namespace specserve::engine {

StepCostModel::StepCostModel(StepCosts costs) : costs_(std::move(costs)) { check_step_costs(costs_); }

namespace {

// A piecewise-linear curve through (x, y): flat below the first knot, each segment's slope between knots,
// the last segment's past the last knot (with one knot: proportional past it).
double curve_at(const std::vector<double>& x, const std::vector<double>& y, double at) {
  if (x.size() == 1) return y.front() * std::max(1.0, at / x.front());
  if (at <= x.front()) return y.front();
  size_t i = 1;
  while (i + 1 < x.size() && at > x[i]) ++i;
  const double slope = (y[i] - y[i - 1]) / (x[i] - x[i - 1]);
  return y[i - 1] + slope * (at - x[i - 1]);
}

}  // namespace

double StepCostModel::row_seconds(double rows) const { return curve_at(costs_.row_knots, costs_.row_seconds, rows); }

double StepCostModel::min_row_slope(double from, double to) const {
  const auto& x = costs_.row_knots;
  const auto& y = costs_.row_seconds;
  // row_seconds is piecewise linear: flat up to the first knot, then each segment's slope (with one knot:
  // proportional past it), the last segment's extended past the last knot.
  double least = std::numeric_limits<double>::infinity();
  if (from < x.front()) least = 0;
  if (x.size() == 1) return to > x.front() ? std::min(least, y.front() / x.front()) : least;
  for (size_t i = 1; i < x.size(); ++i) {
    const bool last = i + 1 == x.size();
    // Segment i covers (x[i-1], x[i]], and past x[i] too when it is the last one.
    if (to <= x[i - 1] || (!last && from >= x[i])) continue;
    least = std::min(least, (y[i] - y[i - 1]) / (x[i] - x[i - 1]));
  }
  return least == std::numeric_limits<double>::infinity() ? 0 : least;
}

double StepCostModel::step_seconds(double rows, double sequences, double context_sum,
                                   double extra_row_context_sum) const {
  if (rows <= sequences && !costs_.plain_knots.empty()) return plain_seconds(sequences, context_sum);
  return verify_seconds(rows, sequences, context_sum, extra_row_context_sum);
}

double StepCostModel::verify_seconds(double rows, double sequences, double context_sum,
                                     double extra_row_context_sum) const {
  return row_seconds(rows) + costs_.sequence_s * sequences + costs_.context_s * context_sum +
         costs_.row_context_s * extra_row_context_sum;
}

double StepCostModel::plain_seconds(double sequences, double context_sum) const {
  if (costs_.plain_knots.empty()) return verify_seconds(sequences, sequences, context_sum, 0);
  return curve_at(costs_.plain_knots, costs_.plain_seconds, sequences) + costs_.context_s * context_sum;
}

double StepCostModel::uniform_step_seconds(int sequences, int rows_per_sequence, int64_t context) const {
  const double c = static_cast<double>(context);
  return step_seconds(double(sequences) * rows_per_sequence, sequences, sequences * c,
                      sequences * (rows_per_sequence - 1) * c);
}

double StepCostModel::propose_seconds(double sequences, double context_sum, double drafts) const {
  if (sequences <= 0) return 0;
  return costs_.propose_s + costs_.propose_sequence_s * sequences + costs_.propose_context_s * context_sum +
         costs_.propose_draft_s * drafts;
}

std::string StepCostModel::describe(int gamma_max) const {
  const int k = gamma_max + 1;
  auto ms = [](double s) { return s * 1e3; };
  return fmt::format(
      "at 1024 positions: decode 1/16/64 sequences {:.2f}/{:.2f}/{:.2f} ms, verify of {} rows for 1/16 sequences "
      "{:.2f}/{:.2f} ms, propose 1/16 {:.2f}/{:.2f} ms ({} drafts each; {:.3f} ms a draft); +{:.3f} ms per 1,000 "
      "positions of a decode row",
      ms(uniform_step_seconds(1, 1, 1024)), ms(uniform_step_seconds(16, 1, 1024)),
      ms(uniform_step_seconds(64, 1, 1024)), k, ms(uniform_step_seconds(1, k, 1024)),
      ms(uniform_step_seconds(16, k, 1024)), ms(propose_seconds(1, 1024, gamma_max)),
      ms(propose_seconds(16, 16 * 1024.0, 16.0 * gamma_max)), gamma_max, ms(costs_.propose_draft_s),
      ms(costs_.context_s * 1000));
}

namespace {

// Weighted least squares: min Σ_r w_r (A_r·x − b_r)² over x, where the columns in `nonneg` must be >= 0
// (every subset of them pinned to 0 is tried; the best feasible fit wins). A tiny ridge keeps columns the
// data cannot tell apart solvable (they share the fit).
std::vector<double> fit_columns(const std::vector<std::vector<double>>& A, const std::vector<double>& b,
                                const std::vector<double>& w, const std::vector<size_t>& nonneg) {
  const size_t n = A.empty() ? 0 : A.front().size();
  std::vector<double> best(n, 0.0);
  double best_residual = std::numeric_limits<double>::infinity();
  for (uint32_t pinned = 0; pinned < (1u << nonneg.size()); ++pinned) {
    std::vector<bool> zero(n, false);
    for (size_t i = 0; i < nonneg.size(); ++i)
      if (pinned & (1u << i)) zero[nonneg[i]] = true;
    // Normal equations over the free columns.
    std::vector<std::vector<double>> M(n, std::vector<double>(n + 1, 0.0));
    for (size_t r = 0; r < A.size(); ++r)
      for (size_t i = 0; i < n; ++i) {
        if (zero[i]) continue;
        for (size_t j = 0; j < n; ++j)
          if (!zero[j]) M[i][j] += w[r] * A[r][i] * A[r][j];
        M[i][n] += w[r] * A[r][i] * b[r];
      }
    for (size_t i = 0; i < n; ++i) {
      if (zero[i]) {
        M[i][i] = 1;
        continue;
      }
      M[i][i] += 1e-9 * (M[i][i] > 0 ? M[i][i] : 1.0);
    }
    // Gaussian elimination with partial pivoting.
    for (size_t c = 0; c < n; ++c) {
      size_t p = c;
      for (size_t r = c + 1; r < n; ++r)
        if (std::abs(M[r][c]) > std::abs(M[p][c])) p = r;
      std::swap(M[c], M[p]);
      if (M[c][c] == 0) continue;
      for (size_t r = 0; r < n; ++r) {
        if (r == c || M[r][c] == 0) continue;
        const double f = M[r][c] / M[c][c];
        for (size_t j = c; j <= n; ++j) M[r][j] -= f * M[c][j];
      }
    }
    std::vector<double> x(n, 0.0);
    for (size_t i = 0; i < n; ++i) x[i] = zero[i] || M[i][i] == 0 ? 0.0 : M[i][n] / M[i][i];
    bool feasible = true;
    for (size_t i : nonneg) feasible = feasible && x[i] >= 0;
    if (!feasible) continue;
    double residual = 0;
    for (size_t r = 0; r < A.size(); ++r) {
      double e = -b[r];
      for (size_t i = 0; i < n; ++i) e += A[r][i] * x[i];
      residual += w[r] * e * e;
    }
    if (residual < best_residual) {
      best_residual = residual;
      best = x;
    }
  }
  return best;
}

// Non-decreasing, positive times at the knots from the fit's values (a step of more rows or sequences never
// costs less); all zero (everything went into the other terms): `smallest` × 1e-3.
std::vector<double> monotone_times(const std::vector<double>& fitted, double smallest) {
  std::vector<double> out;
  double floor = std::numeric_limits<double>::min();
  for (double v : fitted) {
    floor = std::max(floor, v);
    out.push_back(floor);
  }
  if (!out.empty() && out.front() <= std::numeric_limits<double>::min())
    for (double& v : out) v = std::max(v, smallest * 1e-3);
  return out;
}

std::vector<double> sorted_unique(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

size_t knot_index(const std::vector<double>& knots, double at) {
  return static_cast<size_t>(std::lower_bound(knots.begin(), knots.end(), at) - knots.begin());
}

}  // namespace

StepCosts fit_step_costs(std::span<const StepTiming> steps, std::span<const ProposeTiming> proposes) {
  SS_CHECK(!steps.empty(), "step cost fit: no step timings");
  double smallest = steps.front().seconds;
  bool any_plain = false, any_verify = false;
  for (const StepTiming& t : steps) {
    SS_CHECK(t.batch >= 1 && t.rows_per_sequence >= 1 && t.context >= 0 && t.extra_rows >= 0 &&
                 t.extra_rows < t.batch && std::isfinite(t.seconds) && t.seconds > 0,
             "step cost fit: a timing of {} sequences x {} rows (+{}) at {} positions took {} s", t.batch,
             t.rows_per_sequence, t.extra_rows, t.context, t.seconds);
    smallest = std::min(smallest, t.seconds);
    (t.plain() ? any_plain : any_verify) = true;
  }
  // Plain steps get their own curve d(S) when verify steps were timed too (then w's knots are the verify
  // steps' row counts); with one kind only, w carries every step (and there is no plain curve).
  const bool plain_curve = any_plain && any_verify;
  std::vector<double> row_at, plain_at;
  for (const StepTiming& t : steps) (plain_curve && t.plain() ? plain_at : row_at).push_back(t.rows());
  const std::vector<double> knots = sorted_unique(row_at), plain_knots = sorted_unique(plain_at);
  const size_t K = knots.size(), P = plain_knots.size();
  // Columns: w at each knot, d at each plain knot, then sequence_s, context_s, row_context_s.
  std::vector<std::vector<double>> A;
  std::vector<double> b, w;
  for (const StepTiming& t : steps) {
    std::vector<double> row(K + P + 3, 0.0);
    if (plain_curve && t.plain()) {
      row[K + knot_index(plain_knots, t.rows())] = 1;  // d(S) holds the per-sequence share
    } else {
      row[knot_index(knots, t.rows())] = 1;
      row[K + P] = t.batch;
      row[K + P + 2] = t.extra_row_context_sum();
    }
    row[K + P + 1] = double(t.batch) * double(t.context);
    A.push_back(row);
    b.push_back(t.seconds);
    w.push_back(1.0 / (t.seconds * t.seconds));
  }
  const std::vector<double> x = fit_columns(A, b, w, {K + P, K + P + 1, K + P + 2});
  StepCosts c;
  c.row_knots = knots;
  c.row_seconds = monotone_times({x.begin(), x.begin() + static_cast<std::ptrdiff_t>(K)}, smallest);
  if (plain_curve) {
    c.plain_knots = plain_knots;
    c.plain_seconds = monotone_times(
        {x.begin() + static_cast<std::ptrdiff_t>(K), x.begin() + static_cast<std::ptrdiff_t>(K + P)}, smallest);
  }
  c.sequence_s = x[K + P];
  c.context_s = x[K + P + 1];
  c.row_context_s = x[K + P + 2];

  if (!proposes.empty()) {
    std::vector<std::vector<double>> P;
    std::vector<double> pb, pw;
    for (const ProposeTiming& t : proposes) {
      SS_CHECK(t.batch >= 1 && t.context >= 0 && t.slots >= 1 && std::isfinite(t.seconds) && t.seconds > 0,
               "step cost fit: a propose of {} sequences x {} drafts at {} positions took {} s", t.batch, t.slots,
               t.context, t.seconds);
      P.push_back({1.0, double(t.batch), double(t.batch) * double(t.context), double(t.batch) * t.slots});
      pb.push_back(t.seconds);
      pw.push_back(1.0 / (t.seconds * t.seconds));
    }
    const std::vector<double> y = fit_columns(P, pb, pw, {0, 1, 2, 3});
    c.propose_s = y[0];
    c.propose_sequence_s = y[1];
    c.propose_context_s = y[2];
    c.propose_draft_s = y[3];
  }
  check_step_costs(c);
  return c;
}

}  // namespace specserve::engine
