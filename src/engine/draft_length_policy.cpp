#include "engine/draft_length_policy.h"

#include <algorithm>
#include <string_view>
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

DraftLengthPolicy::DraftLengthPolicy(const EngineOptions& options, EngineMetrics& metrics) {
  if (options.draft_policy != DraftPolicy::Adaptive) return;
  SS_CHECK(options.step_costs.has_value(), "the adaptive draft policy needs a step cost model");
  model_.emplace(*options.step_costs);
  metrics.step_cost_model.store(true);
  for (size_t i = 0; i < EngineMetrics::kStepCostPoints.size(); ++i) {
    const auto& p = EngineMetrics::kStepCostPoints[i];
    const double s = std::string_view(p.kind) == "propose"
                         ? model_->propose_seconds(p.sequences, double(p.sequences) * p.context)
                         : model_->uniform_step_seconds(p.sequences, p.rows, p.context);
    metrics.step_cost_seconds[i].store(s);
  }
}

static_assert((DraftLengthPolicy::kProbeInterval / DraftLengthPolicy::kFirstProbeInterval &
               (DraftLengthPolicy::kProbeInterval / DraftLengthPolicy::kFirstProbeInterval - 1)) == 0,
              "the back-off doubles from the first interval to exactly the longest");

int64_t DraftLengthPolicy::probe_interval(int quiet_probes) {
  int64_t interval = kFirstProbeInterval;
  for (int i = 0; i < quiet_probes && interval < kProbeInterval; ++i) interval *= 2;
  return interval;
}

bool DraftLengthPolicy::probes(int64_t step, int64_t since, int quiet_probes) {
  const int64_t interval = probe_interval(quiet_probes);
  // A verify chosen at step c is observed at c + 1 (since_step): probes chosen every `interval` steps.
  return since >= 0 && step % interval == 0 && step - since >= interval - 1;
}

bool DraftLengthPolicy::schedule_probe(int64_t step, const AcceptanceStats& stats, DraftCandidate& candidate) {
  candidate.min_drafts = 0;
  if (candidate.max_drafts == 0 || !probes(step, stats.since_step(), stats.quiet_probes())) return false;
  candidate.min_drafts = std::min(candidate.max_drafts, kProbeDrafts);
  return true;
}

int DraftLengthPolicy::schedule_probes(int64_t step, std::span<const AcceptanceStats* const> stats,
                                       std::span<DraftCandidate> candidates) {
  SS_CHECK(stats.size() == candidates.size(), "draft policy: {} statistics for {} candidates", stats.size(),
           candidates.size());
  std::vector<size_t> due;
  for (size_t i = 0; i < candidates.size(); ++i)
    if (schedule_probe(step, *stats[i], candidates[i])) due.push_back(i);
  if (due.size() > static_cast<size_t>(kMaxProbesPerStep)) {
    std::stable_sort(due.begin(), due.end(),
                     [&](size_t a, size_t b) { return stats[a]->since_step() < stats[b]->since_step(); });
    for (size_t k = static_cast<size_t>(kMaxProbesPerStep); k < due.size(); ++k) candidates[due[k]].min_drafts = 0;
    due.resize(static_cast<size_t>(kMaxProbesPerStep));
  }
  return static_cast<int>(due.size());
}

int DraftLengthPolicy::afford_probes(std::span<DraftCandidate> candidates) {
  if (!model_) return 0;
  double n = 0, context = 0, extra_rows = 0, extra_context = 0, probing = 0, probing_context = 0;
  for (const DraftCandidate& c : candidates) {
    const auto ctx = static_cast<double>(c.context);
    n += 1;
    context += ctx;
    if (c.min_drafts == 0) continue;
    extra_rows += c.min_drafts;
    extra_context += c.min_drafts * ctx;
    probing += 1;
    probing_context += ctx;
  }
  const double plain = model_->step_seconds(n, n, context, 0) * correction_.plain;
  probe_credit_ = probe_credit_ < 0 ? plain : std::min(plain, probe_credit_ + kProbeBudget * plain);
  if (probing == 0) return 0;
  const double with = (model_->step_seconds(n + extra_rows, n, context, extra_context) +
                       model_->propose_seconds(probing, probing_context)) *
                      correction_.drafting;
  const double cost = std::max(0.0, with - plain);
  if (cost > probe_credit_) {
    for (DraftCandidate& c : candidates) c.min_drafts = 0;
    return 0;
  }
  probe_credit_ -= cost;
  return static_cast<int>(probing);
}

void DraftLengthPolicy::observe_step(bool drafting, double predicted, double measured) {
  if (!(predicted > 0) || !(measured > 0)) return;
  const double ratio = std::clamp(measured / predicted, 0.25, 4.0);
  double& c = drafting ? correction_.drafting : correction_.plain;
  c += kCorrectionWeight * (ratio - c);
}

void DraftLengthPolicy::after_choice(AcceptanceStats& stats, const DraftCandidate& candidate, int gamma) {
  if (gamma > candidate.min_drafts) {
    stats.set_quiet_probes(0);  // drafting by choice
  } else if (candidate.min_drafts > 0) {
    if (probe_interval(stats.quiet_probes()) < kProbeInterval) stats.set_quiet_probes(stats.quiet_probes() + 1);
  }
}

}  // namespace specserve::engine
