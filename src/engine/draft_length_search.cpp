#include "engine/draft_length_search.h"

#include <algorithm>
#include <limits>
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
  // Every draft is a row (rows_ − sequences_ of them).
  double model_seconds() const {
    return model_.step_seconds(rows_, sequences_, context_, extra_row_context_) +
           model_.propose_seconds(drafted_, drafted_context_, rows_ - sequences_);
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

// The search of the header (below the entry points).
DraftChoice search(const StepCostModel& model, std::span<const DraftCandidate> candidates,
                   const StepCostCorrection& correction);

void check_candidates(std::span<const DraftCandidate> candidates) {
  for (size_t i = 0; i < candidates.size(); ++i) {
    const DraftCandidate& c = candidates[i];
    SS_CHECK(c.max_drafts >= 0 && c.min_drafts >= 0 && c.min_drafts <= c.max_drafts &&
                 static_cast<int>(c.accept.size()) >= c.max_drafts,
             "draft policy: candidate {} has {}..{} drafts and {} acceptance rates", i, c.min_drafts, c.max_drafts,
             c.accept.size());
  }
}

// The least assignment (every γ at min_drafts) and its terms, summed as the search's running sums sum them
// (so its model seconds are the search's to the bit: every term but the tokens is a sum of integers).
struct Least {
  double rows = 0, context = 0, extra_row_context = 0, tokens = 0, drafted = 0, drafted_context = 0;
  double model_seconds = 0, seconds = 0;
  double verify_model_seconds = 0;  // the forward in the verify form (a drafting step's), plus the propose
};

// Drafts of `c` expected to be accepted when it drafts `g`, summed as the search sums them.
double expected_tokens(const DraftCandidate& c, int g) {
  double e = 0, run = 1;
  for (int j = 1; j <= g; ++j) {
    run *= std::clamp(c.accept[static_cast<size_t>(j - 1)], 0.0, 1.0);
    e += run;
  }
  return e;
}

Least least_assignment(const StepCostModel& model, std::span<const DraftCandidate> candidates,
                       const StepCostCorrection& correction) {
  Least b;
  for (const DraftCandidate& c : candidates) {
    b.rows += 1;
    b.context += static_cast<double>(c.context);
    b.tokens += 1;
  }
  for (const DraftCandidate& c : candidates) {
    const double ctx = static_cast<double>(c.context);
    b.rows += c.min_drafts;
    b.extra_row_context += c.min_drafts * ctx;
    b.tokens += expected_tokens(c, c.min_drafts);
    if (c.min_drafts > 0) {
      b.drafted += 1;
      b.drafted_context += ctx;
    }
  }
  const auto sequences = static_cast<double>(candidates.size());
  const double propose = model.propose_seconds(b.drafted, b.drafted_context, b.rows - sequences);
  b.model_seconds = model.step_seconds(b.rows, sequences, b.context, b.extra_row_context) + propose;
  b.seconds = b.model_seconds * (b.drafted > 0.5 ? correction.drafting : correction.plain);
  b.verify_model_seconds = model.verify_seconds(b.rows, sequences, b.context, b.extra_row_context) + propose;
  return b;
}

bool least_is_best(const StepCostModel& model, std::span<const DraftCandidate> candidates,
                   const StepCostCorrection& correction, const Least& b) {
  double rows_most = 0;
  bool options = false;
  for (const DraftCandidate& c : candidates) {
    rows_most += 1 + c.max_drafts;
    options = options || c.max_drafts > c.min_drafts;
  }
  if (!options) return true;  // the least assignment is the only one
  if (!(b.seconds > 0) || !(b.tokens > 0)) return false;
  const StepCosts& k = model.costs();
  // Another assignment γ (drafting: it raises some γ_i above min_i) takes at least
  //   S_base + Σ_{raised i} (per_row_i · (γ_i − min_i) + fixed_i)
  // seconds: the row share rises by at least its least slope over the rows in reach per added row, the
  // per-position term by the row's positions, the propose by the draft's slot, and a sequence not drafting
  // before joins the propose (whose fixed part is paid once, in S_base, when no sequence drafted before).
  // S_base prices the least assignment's rows in the verify form: a drafting step's forward is one, even
  // where the least assignment is plain rows that the plain curve prices apart.
  const double slope = model.min_row_slope(b.rows, rows_most);
  const double base = correction.drafting * (b.verify_model_seconds + (b.drafted > 0.5 ? 0.0 : k.propose_s));
  // It scores at most (1 − 1e-9) of the least one when its tokens T_B + Σ gain_i stay within rate · seconds,
  // i.e. when Σ_i (gain_i − rate · (per_row_i · Δγ_i + fixed_i)) <= rate · S_base − T_B for every choice of
  // raised sequences: the best choice takes each sequence's best raise where it is positive (at least one).
  const double rate = b.tokens / b.seconds * (1 - 1e-9);
  double best_sum = 0, best_single = -std::numeric_limits<double>::infinity();
  for (const DraftCandidate& c : candidates) {
    if (c.max_drafts == c.min_drafts) continue;
    const double ctx = static_cast<double>(c.context);
    const double per_row = correction.drafting * (slope + k.row_context_s * ctx + k.propose_draft_s);
    const double fixed =
        c.min_drafts > 0 ? 0.0 : correction.drafting * (k.propose_sequence_s + k.propose_context_s * ctx);
    double run = 1, gain = 0, best = -std::numeric_limits<double>::infinity();
    for (int j = 1; j <= c.max_drafts; ++j) {
      run *= std::clamp(c.accept[static_cast<size_t>(j - 1)], 0.0, 1.0);
      if (j <= c.min_drafts) continue;
      gain += run;
      best = std::max(best, gain - rate * (per_row * (j - c.min_drafts) + fixed));
    }
    best_sum += std::max(0.0, best);
    best_single = std::max(best_single, best);
  }
  const double most = best_sum > 0 ? best_sum : best_single;
  return most <= rate * base - b.tokens;
}

}  // namespace

bool min_drafts_are_best(const StepCostModel& model, std::span<const DraftCandidate> candidates,
                         const StepCostCorrection& correction) {
  check_candidates(candidates);
  return least_is_best(model, candidates, correction, least_assignment(model, candidates, correction));
}

DraftChoice choose_draft_lengths(const StepCostModel& model, std::span<const DraftCandidate> candidates,
                                 const StepCostCorrection& correction) {
  DraftChoice choice;
  choose_draft_lengths(model, candidates, correction, choice);
  return choice;
}

void choose_draft_lengths(const StepCostModel& model, std::span<const DraftCandidate> candidates,
                          const StepCostCorrection& correction, DraftChoice& out, bool bound) {
  check_candidates(candidates);
  if (bound) {
    const Least b = least_assignment(model, candidates, correction);
    if (least_is_best(model, candidates, correction, b)) {
      out.gamma.resize(candidates.size());
      for (size_t i = 0; i < candidates.size(); ++i) out.gamma[i] = candidates[i].min_drafts;
      out.tokens = b.tokens;
      out.seconds = b.seconds;
      out.model_seconds = b.model_seconds;
      return;
    }
  }
  out = search(model, candidates, correction);
}

namespace {

// Three starts, each improved by coordinate ascent (the header).
DraftChoice search(const StepCostModel& model, std::span<const DraftCandidate> candidates,
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

  // Coordinate ascent from each start: each sequence's γ re-chosen with the others fixed. A start equal to an
  // earlier one (the best prefix is often the best uniform γ, or every sequence at its most) would end where
  // that one did: skipped.
  std::vector<int> best_gamma = choice.gamma;
  double best_score = 0;
  for (size_t k = 0; k < starts.size(); ++k) {
    const std::vector<int>& start = starts[k];
    if (std::find(starts.begin(), starts.begin() + static_cast<std::ptrdiff_t>(k), start) !=
        starts.begin() + static_cast<std::ptrdiff_t>(k))
      continue;
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

}  // namespace

}  // namespace specserve::engine
