#pragma once
// Draft lengths per sequence, per step (docs/DFLASH.md §13.3). Before each propose the engine asks the
// policy how many drafts γ_i ∈ {0..max_i} each decoding sequence's next verify should carry: the search
// of engine/draft_length_search.h over the sequences' smoothed acceptance (engine/acceptance_stats.h) and
// the step cost model (engine/step_cost_model.h), corrected by measured step times, with probes for
// sequences held at γ = 0 (below). γ_i = 0 makes the sequence a plain decode row of the same forward. The
// choice never changes a token (docs/DESIGN.md §1): only how many drafts are verified.
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "engine/acceptance_stats.h"
#include "engine/draft_length_search.h"
#include "engine/engine_options.h"
#include "engine/metrics.h"
#include "engine/step_cost_model.h"

namespace specserve::engine {

// One decoding sequence of the next step, as the engine hands it to DraftLengthPolicy::choose_step.
struct PolicySequence {
  AcceptanceStats* acceptance = nullptr;  // its statistics (the probe back-off moves in them)
  int64_t context = 0;                    // positions it holds
  int max_drafts = 0;                     // 0: it cannot draft (no drafter context, or its last token)
};

// What choose_step decided for one step.
struct StepDraftChoice {
  std::span<const int> gamma;  // one per sequence; valid until the policy's next choose_step
  double model_seconds = 0;    // the choice's predicted seconds by the cost model alone
  uint64_t drafted = 0;        // sequences that could draft and were given drafts
  uint64_t plain = 0;          // sequences that could draft and were kept plain
  uint64_t probes = 0;         // probes scheduled and afforded
  bool plain_check = false;    // the search drafted, but this step is plain rows to time one (below)
};

// The engine's policy state: the cost model, the engine-wide acceptance (every sequence's prior), and
// the probe schedule. A sequence held at γ = 0 produces no evidence of its own, so once it has gone
// probe_interval steps without a verify it is given kProbeDrafts drafts on the next step whose index is a
// multiple of that interval (all such sequences probe in the same step: one propose). The interval backs
// off: kFirstProbeInterval after the verify that stopped it, doubling with each probe that does not bring
// it back, up to kProbeInterval; it starts again from the first once the policy drafts for it by choice.
// So one unlucky verify costs a few plain steps, and a sequence whose drafts are always wrong costs a
// probe every kProbeInterval steps, or less often where the probe budget (below) binds: on the 8B cost
// table with every draft wrong, a probe of the one sequence (a propose, ~0.27 of a decode step) every
// ~52 steps, a step of four probes at 64 sequences (~3 ms against an 18 ms plain step) every ~31.
class DraftLengthPolicy {
 public:
  static constexpr int kProbeDrafts = 3;
  static constexpr int64_t kFirstProbeInterval = 4;
  static constexpr int64_t kProbeInterval = 32;  // the longest
  // Sequences that probe in one step at most (those waiting longest): a probe of many sequences at once is
  // a verify of 3 more rows each plus their propose, most of a decode step at high concurrency.
  static constexpr int kMaxProbesPerStep = 4;
  // The weight of a new measurement in the step cost correction (about the last ten steps of each kind);
  // the first kPlainWarmup timings of plain steps set the plain correction to their least instead.
  static constexpr double kCorrectionWeight = 0.1;
  static constexpr int64_t kPlainWarmup = 3;
  // Plain checks. A policy that drafts every step never times a plain one, so its plain correction keeps
  // the cost model's word, and a model that overprices a plain step (a launch-bound small model, whose
  // calibration steps take twice what the engine's do) keeps it drafting at a loss: the demo pair at 16
  // sequences once ran 0.42x plain. So once the policy has drafted for kFirstPlainCheck steps without a
  // plain step (kPlainCheckInterval once kPlainWarmup have been timed), the next step it would draft in
  // (without probes) is made of plain rows: the engine times it, the plain correction follows. One step of
  // plain rows in 128 costs about 0.7 % where drafts pay for τ 6.5 tokens a verify.
  static constexpr int64_t kFirstPlainCheck = 16;
  static constexpr int64_t kPlainCheckInterval = 128;
  // The probe budget: probes may cost (predicted: their propose and extra rows) a share of the steps'
  // predicted plain time: kProbeBudget while the engine-wide first drafts are all wrong, rising
  // linearly with their observed acceptance (smoothed over about the last hundred verifies, no prior) to
  // kHopefulProbeBudget at kHopefulAcceptance (below about a fifth, drafts pay at no concurrency on the
  // 8B cost table: a probe is unlikely to bring a sequence back). Unspent credit is kept up to one plain
  // step, or up to the cost of a probe step it could not cover. The policy's first probe step is free (so
  // one unlucky first verify is found out within a few steps); every later one waits for its credit.
  // Issue 29 wants speculation within 3 % of plain decoding when every draft is wrong: at 2 % (and a plain
  // step of credit to start with) probes alone cost 2.5 % of a 128-token pass at 64 sequences on the 8B
  // cost table (tests/engine/test_draft_policy_wrong_drafts.cpp), now about 0.5 %.
  static constexpr double kProbeBudget = 0.005;
  static constexpr double kHopefulProbeBudget = 0.02;
  static constexpr double kHopefulAcceptance = 0.25;
  // The share of the plain steps' time probes may cost now (above).
  double probe_budget() const;

  // Adaptive when options.draft_policy says so (its step_costs then required); publishes the cost model's
  // predictions at EngineMetrics::kStepCostPoints.
  DraftLengthPolicy(const EngineOptions& options, EngineMetrics& metrics);
  bool adaptive() const { return model_.has_value(); }
  const StepCostModel& model() const { return *model_; }
  AcceptanceStats& engine_acceptance() { return engine_acceptance_; }
  const AcceptanceStats& engine_acceptance() const { return engine_acceptance_; }
  // A step the policy predicted `predicted` seconds for took `measured`: moves the correction of its kind.
  void observe_step(bool drafting, double predicted, double measured);
  // Plain steps timed so far.
  int64_t plain_steps_observed() const { return plain_observed_; }
  // Credits the step's share of the probe budget, then keeps the probes schedule_probes left in
  // `candidates` when the credit covers their predicted cost (spent) or they are the policy's first
  // (free), else clears them. Returns how many probe.
  int afford_probes(std::span<DraftCandidate> candidates);
  double probe_credit() const { return probe_credit_; }
  const StepCostCorrection& correction() const { return correction_; }

  // The engine's work for one step `step` (adaptive only): each sequence's candidate (its acceptance read
  // against the engine-wide rates, aged to `step`), the probes due (schedule_probes) and affordable
  // (afford_probes), the choice (choose_draft_lengths with the correction), and the probes' back-off
  // moved (after_choice). Its buffers are kept from step to step.
  StepDraftChoice choose_step(int64_t step, std::span<const PolicySequence> sequences);

  // The interval after `quiet_probes` probes in a row that did not bring the sequence back.
  static int64_t probe_interval(int quiet_probes);
  // Whether a sequence whose acceptance was last seen at step `since` (AcceptanceStats::since_step),
  // after `quiet_probes` such probes, probes at step `step`.
  static bool probes(int64_t step, int64_t since, int quiet_probes);
  // A candidate's probe for step `step` from its statistics: sets candidate.min_drafts; true if it probes.
  static bool schedule_probe(int64_t step, const AcceptanceStats& stats, DraftCandidate& candidate);
  // Every candidate's probe (stats[i] is candidate i's), at most kMaxProbesPerStep of them, those whose
  // acceptance was seen longest ago first (then the lower index). Returns how many probe.
  static int schedule_probes(int64_t step, std::span<const AcceptanceStats* const> stats,
                             std::span<DraftCandidate> candidates);
  // Moves the back-off after the step's choice: `gamma` drafts for `candidate` (as schedule_probe left it).
  static void after_choice(AcceptanceStats& stats, const DraftCandidate& candidate, int gamma);

 private:
  // Makes this step's choice (choice_, `out`) plain rows when a plain check is due (kFirstPlainCheck).
  void plain_check(int64_t step, std::span<const PolicySequence> sequences, StepDraftChoice& out);

  std::optional<StepCostModel> model_;
  AcceptanceStats engine_acceptance_{AcceptanceStats::kEngineDecay, AcceptanceStats::kPriorWeight};
  StepCostCorrection correction_;
  double probe_credit_ = 0;        // seconds
  double unaffordable_probe_ = 0;  // the cost of the last probe step the credit did not cover (0: none since)
  bool first_probe_free_ = true;   // until the first probe step is afforded
  int64_t plain_check_due_ = -1;   // the step of the next plain check (-1: not drafting since the last plain step)
  int64_t plain_observed_ = 0;     // plain steps timed (observe_step)
  // choose_step's buffers, kept from step to step (no allocation on a step of the same sequences).
  std::vector<double> prior_;
  std::vector<DraftCandidate> candidates_;
  std::vector<const AcceptanceStats*> stats_;
  DraftChoice choice_;
};

}  // namespace specserve::engine
