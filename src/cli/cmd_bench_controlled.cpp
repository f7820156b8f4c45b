// `specserve bench controlled`: speculation at chosen acceptances on a real model shape, under the fixed and the
// adaptive draft-length policy (cli/controlled_bench.h).
//   specserve bench controlled --synthetic SHAPE [--acceptance geometric:1,3,6.5]   random weights and the
//                                                                                   shape's z-lab drafter
//   specserve bench controlled --model DIR --draft DIR [--acceptance ...]          a checkpoint pair
// A benchmark only: `serve` has no way to reach the controlled proposer.
#include <algorithm>
#include <cstdio>
#include <memory>

#include "cli/bench_models.h"
#include "cli/bench_modes.h"
#include "cli/common_flags.h"
#include "cli/controlled_bench.h"
#include "cli/drafter_flags.h"
#include "core/error.h"
#include "model/target_model.h"
#include "spec/dflash_drafter.h"

namespace specserve::cli {

namespace {

struct ControlledArgs {
  BenchModelFlags models;
  std::string acceptance = "geometric:6.5";
  std::string policies = "fixed,adaptive";
  ControlledBenchOptions bench;
};

int run_controlled(const ControlledArgs& a) {
  ControlledBenchOptions options = a.bench;
  options.acceptance = parse_acceptance_list(a.acceptance);  // before any weights are made
  options.policies = parse_policy_list(a.policies);
  SS_CHECK(a.bench.step_cost_profile.empty() || std::find(options.policies.begin(), options.policies.end(),
                                                          engine::DraftPolicy::Adaptive) != options.policies.end(),
           "bench controlled: --step-cost-profile needs the adaptive policy in --policies");
  SS_CHECK(a.models.model.empty() || !a.models.drafter.draft.empty(),
           "bench controlled: --model needs --draft DIR (the drafter whose forward is timed)");
  BenchModels m = load_bench_models(a.models, "bench controlled");
  std::unique_ptr<TargetModel>& target = m.target;
  std::unique_ptr<spec::DFlashDrafter>& drafter = m.drafter;
  const std::string& label = m.label;
  std::string profiles;
  for (const AcceptanceSpec& spec : options.acceptance) profiles += (profiles.empty() ? "" : "; ") + spec.label();
  std::fprintf(stderr, "bench controlled: acceptance-controlled run, %s; policies %s\n", profiles.c_str(),
               a.policies.c_str());
  const ControlledBenchResult r = run_controlled_bench(*target, *drafter, label, options);
  std::fputs(format_controlled_bench(r, options).c_str(), stdout);
  return 0;
}

}  // namespace

void register_bench_controlled(CLI::App& bench, CommandRunner& run) {
  auto* cmd = bench.add_subcommand(
      kBenchControlled,
      "Acceptance-controlled speculation: plain vs DFlash tokens/s per concurrency level and acceptance, under "
      "each draft-length policy, with the real drafter forward but drafts taken from the recorded plain output, "
      "corrupted to a chosen acceptance (a benchmark only; outputs are checked equal to plain decoding)");
  auto a = std::make_shared<ControlledArgs>();
  add_bench_model_flags(*cmd, a->models);
  add_prefill_hold_flags(*cmd, a->bench.prefill_hold_steps, a->bench.prefill_hold_rows);
  cmd->add_option("--gamma", a->bench.gamma,
                  "Drafts per verify step, 1..block_size-1 (0 = block_size - 1); the adaptive policy's most")
      ->capture_default_str();
  cmd->add_option("--acceptance", a->acceptance,
                  "Acceptance profiles, comma-separated, each measured at every level: geometric:TAU (each draft "
                  "correct with one probability chosen so that accepted drafts + the bonus token average TAU per "
                  "verify, 1 <= TAU <= gamma + 1; TAU = 1: every draft wrong) or profile:P1,P2,... (draft i correct "
                  "with probability Pi given draft i-1 was; drafts past the list are wrong). A bare number continues "
                  "the item before it: geometric:1,3,6.5 is three profiles")
      ->capture_default_str()
      ->check(acceptance_list_problem);
  cmd->add_option("--policies", a->policies,
                  "Draft-length policies to measure, comma-separated: fixed (every sequence drafts --gamma) and/or "
                  "adaptive (per sequence and step 0..--gamma drafts from its acceptance and the step cost model, "
                  "as `serve` runs by default)")
      ->capture_default_str()
      ->check(policy_list_problem);
  cmd->add_option("--step-cost-profile", a->bench.step_cost_profile,
                  "Step costs for the adaptive policy, as `specserve bench step-costs --out FILE` wrote them for this "
                  "model, device and build (default: timed once at the start of the run, as `serve` does; a profile "
                  "that does not match or parse is refused with a warning and timed instead)");
  cmd->add_option("--concurrency", a->bench.concurrency, "Concurrency levels (requests decoding at once)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--requests", a->bench.requests, "Requests per level (0 = the level's concurrency)")
      ->capture_default_str();
  cmd->add_option("--prompt-tokens", a->bench.prompt_tokens, "Random prompt length in tokens")->capture_default_str();
  cmd->add_option("--max-tokens", a->bench.max_tokens, "Tokens generated per request (EOS ignored)")
      ->capture_default_str();
  cmd->add_option("--temperature", a->bench.temperature, "Sampling temperature (T > 0 is seeded per request)")
      ->capture_default_str();
  cmd->add_option("--seed", a->bench.seed, "Seed of the prompts, the requests' sampling and the corruption process")
      ->capture_default_str();
  cmd->callback([&run, a] { run = [a] { return run_controlled(*a); }; });
}

}  // namespace specserve::cli
