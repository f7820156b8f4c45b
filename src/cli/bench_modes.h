#pragma once
// `specserve bench` has one subcommand per measurement, each with its own flags and help:
//   bench steps       step times of decode, verify, propose and prefill (cli/step_bench.h), on a real
//                     model shape with random weights (--synthetic) or on a checkpoint (--model)
//   bench serve-load  HTTP load on a server (in-process with --model, or a running one with --url):
//                     TTFT, inter-token latency and tokens/s per concurrency level
//   bench controlled  plain vs speculative tokens/s at a chosen acceptance (cli/controlled_bench.h):
//                     the real drafter forward, drafts from the recorded plain output, corrupted
//   bench step-costs  the draft-length policy's step cost model, measured and fitted, written as the
//                     profile `serve --step-cost-profile` reads (cli/step_cost_calibration.h)
#include <string>
#include <vector>

#include "cli/commands.h"

namespace specserve::cli {

inline constexpr const char* kBenchSteps = "steps";
inline constexpr const char* kBenchServeLoad = "serve-load";
inline constexpr const char* kBenchControlled = "controlled";
inline constexpr const char* kBenchStepCosts = "step-costs";

void register_bench_steps(CLI::App& bench, CommandRunner& run);
void register_bench_serve_load(CLI::App& bench, CommandRunner& run);
void register_bench_controlled(CLI::App& bench, CommandRunner& run);
void register_bench_step_costs(CLI::App& bench, CommandRunner& run);

// The command line before bench had modes (`specserve bench --synthetic ...`, `bench --steps ...`,
// `bench --model DIR --concurrency ...`) still runs: when args[1] is "bench" and args[2] is a flag
// other than help, the mode is inserted after "bench" (steps when --synthetic or --steps is given,
// else serve-load). Returns a note naming the new command for stderr, or "" when args were left as
// they were. args[0] is the program name.
std::string route_legacy_bench(std::vector<std::string>& args);

}  // namespace specserve::cli
