// `specserve bench MODE`: the benchmarks, one subcommand per measurement (cli/bench_modes.h):
// `bench steps` (engine step times) and `bench serve-load` (HTTP load). The old spellings without a
// mode are routed by route_legacy_bench before parsing.
#include "cli/bench_modes.h"

namespace specserve::cli {

void register_bench(CLI::App& app, CommandRunner& run) {
  auto* cmd = app.add_subcommand(
      "bench",
      "Benchmarks: `bench steps` (decode/verify/propose/prefill step times) or `bench serve-load` (HTTP "
      "load: TTFT, inter-token latency, tokens/s) or `bench controlled` (speculation at a chosen acceptance) or "
      "`bench step-costs` (the draft-length policy's step cost profile)");
  cmd->require_subcommand(1);
  register_bench_steps(*cmd, run);
  register_bench_serve_load(*cmd, run);
  register_bench_controlled(*cmd, run);
  register_bench_step_costs(*cmd, run);
}

}  // namespace specserve::cli
