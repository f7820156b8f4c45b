#include "engine/draft_length_search.h"

#include <algorithm>
#include <tuple>

#include "core/error.h"

namespace specserve::engine {

namespace {

// The step as running sums, so one sequence's γ changes the score in O(1).
class StepSums {
 public:
  StepSums(const StepCostModel& model, const StepCostCorrection& correction, std::span<const DraftCandidate> c,
           const std::vector<std::vector<double>>& expected)
      : model_(model), correction_(correction), c_(c), expected_(expected) {
    for (const DraftCandidate& d : c) {
      rows_ += 1;
      context_ += static_cast<double>(d.context);
      tokens_ += 1;
    }
    sequences_ = static_cast<double>(c.size());
  }

  void add(size_t i, int gamma, double sign) {
    const double ctx = static_cast<double>(c_[i].context);
    rows_ += sign * gamma;
    extra_row_context_ += sign * gamma * ctx;
    tokens_ += sign * expected_[i][static_cast<size_t>(gamma)];
    if (gamma > 0) {
      drafted_ += sign;
      drafted_context_ += sign * ctx;
    }
  }
  double model_seconds() const {
    return model_.step_seconds(rows_, sequences_, context_, extra_row_context_) +
           model_.propose_seconds(drafted_, drafted_context_);
  }
  double seconds() const { return model_seconds() * (drafted_ > 0.5 ? correction_.drafting : correction_.plain); }
  double tokens() const { return tokens_; }
  double score() const { return tokens_ / seconds(); }

 private:
  const StepCostModel& model_;
  const StepCostCorrection& correction_;
  std::span<const DraftCandidate> c_;
  const std::vector<std::vector<double>>& expected_;
  double rows_ = 0, sequences_ = 0, context_ = 0, extra_row_context_ = 0, tokens_ = 0;
  double drafted_ = 0, drafted_context_ = 0;
};

bool better(double a, double b) { return a > b * (1 + 1e-12); }

}  // namespace

DraftChoice choose_draft_lengths(const StepCostModel& model, std::span<const DraftCandidate> candidates,
                                 const StepCostCorrection& correction) {
  const size_t n = candidates.size();
  DraftChoice choice;
  choice.gamma.assign(n, 0);
  // expected[i][g]: drafts of sequence i expected to be accepted when it drafts g.
  std::vector<std::vector<double>> expected(n);
  struct Increment {
    double gain;
    int j;
    size_t i;
  };
  std::vector<Increment> increments;
  for (size_t i = 0; i < n; ++i) {
    const DraftCandidate& c = candidates[i];
    SS_CHECK(c.max_drafts >= 0 && c.min_drafts >= 0 && c.min_drafts <= c.max_drafts &&
                 static_cast<int>(c.accept.size()) >= c.max_drafts,
             "draft policy: candidate {} has {}..{} drafts and {} acceptance rates", i, c.min_drafts, c.max_drafts,
             c.accept.size());
    expected[i].assign(static_cast<size_t>(c.max_drafts) + 1, 0.0);
    double run = 1;
    for (int j = 1; j <= c.max_drafts; ++j) {
      run *= std::clamp(c.accept[static_cast<size_t>(j - 1)], 0.0, 1.0);
      expected[i][static_cast<size_t>(j)] = expected[i][static_cast<size_t>(j - 1)] + run;
      if (j > c.min_drafts) increments.push_back({run, j, i});
    }
    choice.gamma[i] = c.min_drafts;
  }
  StepSums sums(model, correction, candidates, expected);
  for (size_t i = 0; i < n; ++i) sums.add(i, choice.gamma[i], +1);

  // Starting points: the best prefix of the increments in order of their expected token, every sequence
  // at its most drafts, and the best uniform γ; each then improved by coordinate ascent (below).
  std::sort(increments.begin(), increments.end(), [](const Increment& a, const Increment& b) {
    return std::tie(b.gain, a.j, a.i) < std::tie(a.gain, b.j, b.i);
  });
  auto set_all = [&](std::vector<int>& from, const std::vector<int>& to) {
    for (size_t i = 0; i < n; ++i) {
      sums.add(i, from[i], -1);
      from[i] = to[i];
      sums.add(i, from[i], +1);
    }
  };
  std::vector<int> gamma = choice.gamma;  // what `sums` holds
  std::vector<std::vector<int>> starts;
  {
    double best = sums.score();
    std::vector<int> best_gamma = gamma;
    for (const Increment& inc : increments) {
      if (gamma[inc.i] + 1 != inc.j) continue;  // cannot happen: gains do not grow with j
      sums.add(inc.i, gamma[inc.i], -1);
      gamma[inc.i] = inc.j;
      sums.add(inc.i, gamma[inc.i], +1);
      if (better(sums.score(), best)) {
        best = sums.score();
        best_gamma = gamma;
      }
    }
    starts.push_back(best_gamma);  // `gamma` is now every sequence at its most
    starts.push_back(gamma);
    int max_all = 0;
    for (const DraftCandidate& c : candidates) max_all = std::max(max_all, c.max_drafts);
    std::vector<int> uniform(n), best_uniform = choice.gamma;
    double best_u = 0;
    for (int g = 0; g <= max_all; ++g) {
      for (size_t i = 0; i < n; ++i) uniform[i] = std::clamp(g, candidates[i].min_drafts, candidates[i].max_drafts);
      set_all(gamma, uniform);
      if (better(sums.score(), best_u)) {
        best_u = sums.score();
        best_uniform = uniform;
      }
    }
    starts.push_back(best_uniform);
  }

  // Coordinate ascent from each start: each sequence's γ re-chosen with the others fixed.
  std::vector<int> best_gamma = choice.gamma;
  double best_score = 0;
  for (const std::vector<int>& start : starts) {
    set_all(gamma, start);
    for (int pass = 0; pass < 4; ++pass) {
      bool moved = false;
      for (size_t i = 0; i < n; ++i) {
        const DraftCandidate& c = candidates[i];
        if (c.max_drafts == c.min_drafts) continue;
        const double current = sums.score();
        sums.add(i, gamma[i], -1);
        int best_g = gamma[i];
        double best_s = current;
        for (int g = c.min_drafts; g <= c.max_drafts; ++g) {
          sums.add(i, g, +1);
          const double s = sums.score();
          sums.add(i, g, -1);
          if (better(s, best_s)) {
            best_s = s;
            best_g = g;
          }
        }
        moved = moved || best_g != gamma[i];
        gamma[i] = best_g;
        sums.add(i, gamma[i], +1);
      }
      if (!moved) break;
    }
    if (better(sums.score(), best_score)) {
      best_score = sums.score();
      best_gamma = gamma;
    }
  }
  set_all(gamma, best_gamma);
  choice.gamma = gamma;
  choice.tokens = sums.tokens();
  choice.seconds = sums.seconds();
  choice.model_seconds = sums.model_seconds();
  return choice;
}

}  // namespace specserve::engine
