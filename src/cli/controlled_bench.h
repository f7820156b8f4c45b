#pragma once
// The acceptance-controlled benchmark behind `specserve bench controlled` (cli/bench_modes.h): DFlash
// speculation on a real model shape at a chosen acceptance, where a random-weight drafter would accept
// nothing. Per concurrency level, on random prompts (distinct, from the seed):
//   1. record:     plain decoding of every request (the recording, and the plain engine's warm-up);
//   2. plain:      plain decoding again on the same engine, timed; its tokens must equal the recording;
//   3. controlled: for every acceptance profile and every draft-length policy (fixed: γ drafts per verify;
//                  adaptive: engine/draft_length_policy.h on the step cost model), speculation through
//                  ControlledDraftProposer (cli/controlled_draft_proposer.h): the real drafter forward every
//                  step, drafts taken from the recording and corrupted by the profile; on a GPU run once
//                  untimed, then timed on the same engine (its steady state); its tokens must equal the
//                  recording.
// A mismatch is an Error, never a number. Every table line says it is acceptance-controlled.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine_options.h"
#include "io/acceptance_spec.h"
#include "io/step_cost_profile.h"
#include "model/target_model.h"
#include "spec/dflash_drafter.h"

namespace specserve::cli {

struct ControlledBenchOptions {
  std::vector<AcceptanceSpec> acceptance{parse_acceptance_spec("geometric:6.5")};
  std::vector<engine::DraftPolicy> policies{engine::DraftPolicy::Fixed, engine::DraftPolicy::Adaptive};
  std::vector<int> concurrency{1, 4, 16};
  int requests = 0;  // per level; 0: the level's concurrency
  int prompt_tokens = 128;
  int max_tokens = 128;  // tokens generated per request (EOS ignored)
  float temperature = 0;
  uint64_t seed = 1;  // prompts, the requests' sampling seeds and the corruption process
  int gamma = 0;      // drafts per verify (fixed), the most a sequence drafts (adaptive); 0: block size − 1
  // The adaptive policy's step costs; none: calibrated once, as `serve` does at start-up
  // (cli/step_cost_calibration.h, serving_step_costs), from step_cost_profile when it names a valid profile.
  std::optional<StepCosts> step_costs;
  std::string step_cost_profile;
  // Each engine's untimed pass before its timed one (run_controlled_bench) runs on a GPU only, unless this
  // is set (tests: the CPU passes are slow and capture no graphs).
  bool warm_up_on_cpu = false;
  // The engines' prefill hold (--prefill-hold-steps / --prefill-hold-rows; engine/batch_plan.h): with --requests
  // above the concurrency, later prompts arrive among decoding sequences, as a server's do.
  int prefill_hold_steps = engine::EngineOptions{}.prefill_hold_steps;
  int prefill_hold_rows = engine::EngineOptions{}.prefill_hold_rows;
};

// "geometric:1,3,6.5" or "geometric:1,profile:0.9,0.8,geometric:6.5": comma-separated items, each
// "geometric:TAU" or "profile:P1" starting a profile, a bare number continuing the one before it (another
// geometric τ; the profile's next probability). Throws Error naming the problem.
std::vector<AcceptanceSpec> parse_acceptance_list(std::string_view text);
// For a CLI11 check of --acceptance: "" when parse_acceptance_list takes `text`, else the problem (CLI11 names
// the flag itself).
std::string acceptance_list_problem(const std::string& text);
// "fixed,adaptive": each once. Throws Error naming the problem.
std::vector<engine::DraftPolicy> parse_policy_list(std::string_view text);
// For a CLI11 check of --policies, as acceptance_list_problem.
std::string policy_list_problem(const std::string& text);

// One speculative pass of one level under one policy.
// The decode phase of a pass: each request's steps after its first (the first follows its prefill), timed on
// the scheduler thread. Tokens over seconds is the generation rate once every prompt is in: at a long prompt
// the whole pass's rate is mostly the prefill's, which speculation does not change.
struct DecodePhase {
  double seconds = 0;  // summed over requests: last step's end − first step's end
  int64_t tokens = 0;  // committed by those steps
  double rate() const { return seconds > 0 ? static_cast<double>(tokens) / seconds : 0; }
};

struct ControlledPass {
  engine::DraftPolicy policy = engine::DraftPolicy::Fixed;
  double seconds = 0;
  DecodePhase decode;
  int64_t verifies = 0;        // verify rows (a sequence's step with drafts)
  int64_t verify_tokens = 0;   // tokens those rows committed (accepted drafts + the bonus token)
  int64_t drafts = 0;          // drafts they verified
  int64_t plain_rows = 0;      // decode rows that could have drafted but the policy kept at γ = 0
  double expected_tokens = 0;  // the expectation of verify_tokens under the profile, given each row's drafts
  double variance = 0;         // the variance of verify_tokens under the profile
};

// One concurrency level at one acceptance profile.
struct ControlledLevel {
  std::string acceptance;    // AcceptanceSpec::label()
  double requested_tau = 0;  // tokens per verify with γ drafts
  int concurrency = 0;
  int requests = 0;
  int64_t tokens = 0;                  // generated by all requests of one pass
  double plain_seconds = 0;            // pass 2 (shared by every profile of the level)
  DecodePhase plain_decode;            // pass 2's decode phase
  std::vector<ControlledPass> passes;  // one per policy, in ControlledBenchOptions::policies order
};

struct ControlledBenchResult {
  std::string label;  // the model
  int gamma = 0;
  std::string step_costs;               // the adaptive policy's cost model (StepCostModel::describe); "" without
  std::vector<ControlledLevel> levels;  // profile-major: every level of the first profile, then the next
};

// Throws Error on bad options, a failed request or a pass whose tokens differ from the recording.
ControlledBenchResult run_controlled_bench(TargetModel& target, const spec::DFlashDrafter& drafter,
                                           const std::string& label, const ControlledBenchOptions& options);
std::string format_controlled_bench(const ControlledBenchResult& result, const ControlledBenchOptions& options);

}  // namespace specserve::cli
