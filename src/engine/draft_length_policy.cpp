#include "engine/draft_length_policy.h"

#include <algorithm>
#include <string_view>

#include "core/error.h"

namespace specserve::engine {

DraftLengthPolicy::DraftLengthPolicy(const EngineOptions& options, EngineMetrics& metrics) {
  if (options.draft_policy != DraftPolicy::Adaptive) return;
  SS_CHECK(options.step_costs.has_value(), "the adaptive draft policy needs a step cost model");
  model_.emplace(*options.step_costs);
  metrics.step_cost_model.store(true);
  for (size_t i = 0; i < EngineMetrics::kStepCostPoints.size(); ++i) {
    const auto& p = EngineMetrics::kStepCostPoints[i];
    const double s =
        std::string_view(p.kind) == "propose"
            ? model_->propose_seconds(p.sequences, double(p.sequences) * p.context, double(p.sequences) * options.gamma)
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

double DraftLengthPolicy::probe_budget() const {
  const double trials = engine_acceptance_.trials_at(1);
  const double rate = trials > 0 ? engine_acceptance_.accepted_at(1) / trials : 0.0;
  const double hope = std::clamp(rate / kHopefulAcceptance, 0.0, 1.0);
  return kProbeBudget + (kHopefulProbeBudget - kProbeBudget) * hope;
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
  // Credit is kept up to one plain step, or up to the last probe step that could not be afforded where
  // that costs more (a propose dearer than a decode step, or a high drafting correction): otherwise such
  // a probe would never be afforded, and a sequence held at 0 drafts would never be seen again.
  probe_credit_ = std::min(std::max(plain, unaffordable_probe_), probe_credit_ + probe_budget() * plain);
  if (probing == 0) return 0;
  if (first_probe_free_) {
    first_probe_free_ = false;
    return static_cast<int>(probing);
  }
  const double with = (model_->step_seconds(n + extra_rows, n, context, extra_context) +
                       model_->propose_seconds(probing, probing_context, extra_rows)) *
                      correction_.drafting;
  const double cost = std::max(0.0, with - plain);
  if (cost > probe_credit_) {
    unaffordable_probe_ = cost;
    for (DraftCandidate& c : candidates) c.min_drafts = 0;
    return 0;
  }
  unaffordable_probe_ = 0;
  probe_credit_ -= cost;
  return static_cast<int>(probing);
}

StepDraftChoice DraftLengthPolicy::choose_step(int64_t step, std::span<const PolicySequence> sequences) {
  SS_CHECK(model_.has_value(), "draft policy: choose_step without a step cost model");
  StepDraftChoice out;
  const size_t n = sequences.size();
  int max_all = 0;
  for (const PolicySequence& s : sequences) max_all = std::max(max_all, s.max_drafts);
  // The engine-wide rates once: every sequence's prior (engine/acceptance_stats.h).
  prior_.resize(static_cast<size_t>(max_all));
  engine_acceptance_.rates(prior_);
  // The buffers are kept from step to step: a candidate's rates keep their storage.
  if (candidates_.size() < n) candidates_.resize(n);
  stats_.resize(n);
  const std::span<DraftCandidate> candidates(candidates_.data(), n);
  for (size_t i = 0; i < n; ++i) {
    AcceptanceStats& a = *sequences[i].acceptance;
    DraftCandidate& c = candidates[i];
    c.max_drafts = sequences[i].max_drafts;
    c.min_drafts = 0;
    c.context = sequences[i].context;
    stats_[i] = &a;
    c.accept.resize(static_cast<size_t>(c.max_drafts));
    if (c.max_drafts == 0) continue;
    a.mark_first_step(step);
    a.rates(c.accept, prior_, step);
  }
  schedule_probes(step, stats_, candidates);
  out.probes = static_cast<uint64_t>(afford_probes(candidates));
  choose_draft_lengths(*model_, candidates, correction_, choice_);
  plain_check(step, sequences, out);
  for (size_t i = 0; i < n; ++i) {
    if (sequences[i].max_drafts == 0) continue;
    ++(choice_.gamma[i] > 0 ? out.drafted : out.plain);
    after_choice(*sequences[i].acceptance, candidates[i], choice_.gamma[i]);
  }
  out.gamma = choice_.gamma;
  out.model_seconds = choice_.model_seconds;
  return out;
}

void DraftLengthPolicy::plain_check(int64_t step, std::span<const PolicySequence> sequences, StepDraftChoice& out) {
  bool drafting = false;
  for (int g : choice_.gamma) drafting = drafting || g > 0;
  if (!drafting) {
    plain_check_due_ = -1;
    return;
  }
  if (plain_check_due_ < 0)
    plain_check_due_ = step + (plain_observed_ >= kPlainWarmup ? kPlainCheckInterval : kFirstPlainCheck);
  if (step < plain_check_due_ || out.probes > 0) return;
  plain_check_due_ = -1;
  out.plain_check = true;
  double context = 0;
  for (const PolicySequence& s : sequences) context += static_cast<double>(s.context);
  const auto n = static_cast<double>(sequences.size());
  std::fill(choice_.gamma.begin(), choice_.gamma.end(), 0);
  choice_.model_seconds = model_->step_seconds(n, n, context, 0);
  choice_.seconds = choice_.model_seconds * correction_.plain;
}

void DraftLengthPolicy::observe_step(bool drafting, double predicted, double measured) {
  if (!(predicted > 0) || !(measured > 0)) return;
  const double ratio = std::clamp(measured / predicted, 0.25, 4.0);
  double& c = drafting ? correction_.drafting : correction_.plain;
  // Plain steps are timed rarely while the policy drafts (plain checks), so their first kPlainWarmup
  // timings set the plain correction outright, as the least of them and the model (1): a step's clock
  // only ever runs long (a first step of a new batch shape launches without a graph or captures one, the
  // host is descheduled), and one such step taken at its word made plain rows look four times dearer
  // than they are (the tiny shape at one sequence then drafted every step with every draft wrong; at 16
  // sequences a plain check whose shape the drafting engine had not run took 2.4x the model's time).
  // Raising the plain correction is left to the tenths below: a plain correction too low only makes the
  // policy draft less. A drafting step's first timings are not trusted either way: the first propose of
  // a sequence projects all its waiting context rows, a cost the model leaves out, so they move the
  // correction by its usual tenth.
  // Past that, one timing moves the correction by a tenth of at most twice its value: a long step (a
  // new batch shape's graph capture) moves it by a tenth at most, a lasting change in a few steps.
  if (!drafting && plain_observed_ < kPlainWarmup)
    c = std::min(c, ratio);
  else
    c += kCorrectionWeight * (std::min(ratio, 2 * c) - c);
  if (!drafting) ++plain_observed_;
}

void DraftLengthPolicy::after_choice(AcceptanceStats& stats, const DraftCandidate& candidate, int gamma) {
  if (gamma > candidate.min_drafts) {
    stats.set_quiet_probes(0);  // drafting by choice
  } else if (candidate.min_drafts > 0) {
    if (probe_interval(stats.quiet_probes()) < kProbeInterval) stats.set_quiet_probes(stats.quiet_probes() + 1);
  }
}

}  // namespace specserve::engine
