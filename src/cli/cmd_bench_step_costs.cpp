// `specserve bench step-costs`: times the steps the draft-length policy's cost model is fitted to
// (cli/step_cost_calibration.h), prints each measured time beside the fitted model's, and writes the
// profile `specserve serve --step-cost-profile` reads (io/step_cost_profile.h).
//   specserve bench step-costs --model DIR --draft DIR --out FILE [--max-seqs N]
//   specserve bench step-costs --synthetic SHAPE --out FILE
#include <cstdio>
#include <fstream>

#include <fmt/format.h>

#include "cli/bench_models.h"
#include "cli/bench_modes.h"
#include "cli/common_flags.h"
#include "cli/drafter_flags.h"
#include "cli/step_bench_common.h"
#include "cli/step_cost_calibration.h"
#include "core/error.h"
#include "engine/engine_options.h"
#include "io/step_cost_profile.h"

namespace specserve::cli {

namespace {

struct StepCostsArgs {
  BenchModelFlags models;
  int max_seqs = 64;
  int gamma = 0;
  int64_t kv_cache_mib = 0;
  std::string out;
};

int run_step_costs(const StepCostsArgs& a) {
  SS_CHECK(a.models.model.empty() || !a.models.drafter.draft.empty(), "bench step-costs: --model needs --draft DIR");
  SS_CHECK(a.max_seqs >= 1, "bench step-costs: --max-seqs must be >= 1");
  BenchModels m = load_bench_models(a.models, "bench step-costs");
  const int block = m.drafter->block_size();
  SS_CHECK(a.gamma >= 0 && a.gamma <= block - 1, "bench step-costs: --gamma must be in [0, {}]", block - 1);
  const int gamma_max = a.gamma > 0 ? a.gamma : block - 1;
  const int chunk = engine::normalised(engine::EngineOptions{}).prefill_chunk;
  const CalibrationPlan plan = calibration_plan(m.target->backend(), a.max_seqs, gamma_max);
  const int64_t blocks = kv_blocks_needed(plan, chunk);
  int seqs = 1;
  for (int b : plan.batches) seqs = std::max(seqs, b);
  for (int b : plan.decode_batches) seqs = std::max(seqs, b);
  const step_bench::KvBudget budget(*m.target, m.drafter.get(), a.kv_cache_mib << 20);
  if (auto note = budget.reserve(*m.target, m.drafter.get(), {blocks, blocks + seqs, seqs}))
    fail("bench step-costs: {}", *note);
  const Calibration c = calibrate_step_costs(*m.target, *m.drafter, plan, chunk);
  const engine::StepCostModel model(c.costs);

  std::string text =
      fmt::format("step costs of {} on {} ({} s to measure; fitted model: {})\n", m.label, step_cost_device(*m.target),
                  fmt::format("{:.1f}", c.seconds), model.describe(gamma_max));
  text += fmt::format("{:>8} {:>6} {:>8} {:>12} {:>12} {:>8}\n", "kind", "seqs", "rows/seq", "measured ms", "model ms",
                      "error");
  for (const auto& t : c.steps) {
    const double p =
        model.step_seconds(t.rows(), t.batch, double(t.batch) * double(t.context), t.extra_row_context_sum());
    const std::string rows = t.extra_rows > 0 ? fmt::format("{}+{}", t.rows_per_sequence, t.extra_rows)
                                              : fmt::format("{}", t.rows_per_sequence);
    text += fmt::format("{:>8} {:>6} {:>8} {:>12.3f} {:>12.3f} {:>+7.1f}%   at {} positions\n",
                        t.rows() == t.batch ? "decode" : "verify", t.batch, rows, t.seconds * 1e3, p * 1e3,
                        (p / t.seconds - 1) * 100, t.context);
  }
  for (const auto& t : c.proposes) {
    const double p = model.propose_seconds(t.batch, double(t.batch) * double(t.context), double(t.batch) * t.slots);
    text +=
        fmt::format("{:>8} {:>6} {:>8} {:>12.3f} {:>12.3f} {:>+7.1f}%   at {} positions\n", "propose", t.batch,
                    fmt::format("{} drafts", t.slots), t.seconds * 1e3, p * 1e3, (p / t.seconds - 1) * 100, t.context);
  }
  std::fputs(text.c_str(), stdout);
  if (!a.out.empty()) {
    StepCostProfile profile{step_cost_model_key(*m.target, *m.drafter), step_cost_device(*m.target), step_cost_build(),
                            c.costs};
    std::ofstream f(a.out, std::ios::binary | std::ios::trunc);
    SS_CHECK(f.good(), "bench step-costs: cannot write '{}'", a.out);
    f << write_step_cost_profile(profile);
    SS_CHECK(f.good(), "bench step-costs: writing '{}' failed", a.out);
    std::fprintf(stderr, "bench step-costs: wrote %s (serve --step-cost-profile %s)\n", a.out.c_str(), a.out.c_str());
  }
  return 0;
}

}  // namespace

void register_bench_step_costs(CLI::App& bench, CommandRunner& run) {
  auto* cmd = bench.add_subcommand(
      kBenchStepCosts,
      "Step costs for the adaptive draft policy: decode, verify and propose times, the fitted cost model beside "
      "them, and the profile `serve --step-cost-profile` reads (--out)");
  auto a = std::make_shared<StepCostsArgs>();
  add_bench_model_flags(*cmd, a->models);
  cmd->add_option("--max-seqs", a->max_seqs, "The most sequences the server will run at once (the largest batch timed)")
      ->capture_default_str();
  cmd->add_option("--gamma", a->gamma, "The most drafts per verify the server allows (0 = block_size - 1)")
      ->capture_default_str();
  cmd->add_option("--kv-cache-mib", a->kv_cache_mib,
                  "KV cache the measurement may hold, in MiB (0 = 90% of the free device memory after the weights, "
                  "half the RAM on the CPU)")
      ->capture_default_str();
  cmd->add_option("--out", a->out, "Write the profile here (keyed by model shape, device and build)");
  cmd->callback([&run, a] { run = [a] { return run_step_costs(*a); }; });
}

}  // namespace specserve::cli
