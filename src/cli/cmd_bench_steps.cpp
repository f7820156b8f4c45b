// `specserve bench steps`: step times, bytes moved and roofline of decode, verify, drafter propose and
// prefill, prefill and time to first token per prompt length, the steps at long contexts, and the
// device's bf16 GEMM rate (cli/step_bench.h).
//   specserve bench steps --synthetic SHAPE                 a real model shape with random weights made on
//                                                          the device, and its z-lab drafter shape
//   specserve bench steps --model DIR [--draft DIR]         a checkpoint (and its drafter)
#include <cstdio>

#include "cli/bench_models.h"
#include "cli/bench_modes.h"
#include "cli/common_flags.h"
#include "cli/drafter_flags.h"
#include "cli/step_bench.h"
#include "core/error.h"
#include "model/target_model.h"
#include "spec/dflash_drafter.h"

namespace specserve::cli {

namespace {

struct StepsArgs {
  BenchModelFlags models;
  bool json = false;
  bool legacy_steps = false;         // `bench --steps`, the old spelling of this mode (ignored)
  std::optional<int> context_alias;  // --context N: --contexts N
  int64_t kv_cache_mib = 0;          // --kv-cache-mib
  StepBenchOptions step;
};

int run_steps(const StepsArgs& a) {
  BenchModels m = load_bench_models(a.models, "bench steps");
  std::unique_ptr<TargetModel>& target = m.target;
  std::unique_ptr<spec::DFlashDrafter>& drafter = m.drafter;
  const std::string& label = m.label;
  std::fprintf(stderr, "bench: weights %s, KV cache %s (--kv-dtype %s)\n",
               std::string(dtype_name(target->weight_dtype())).c_str(),
               std::string(dtype_name(target->kv_dtype())).c_str(), a.models.kv_dtype.c_str());
  StepBenchOptions options = a.step;
  if (a.context_alias) options.contexts = {*a.context_alias};
  SS_CHECK(a.kv_cache_mib >= 0, "bench: --kv-cache-mib must be >= 0");
  options.kv_budget_bytes = a.kv_cache_mib << 20;
  const nlohmann::json r = run_step_bench(*target, drafter.get(), label, options);
  std::fputs(a.json ? (r.dump(2) + "\n").c_str() : format_step_bench(r).c_str(), stdout);
  return 0;
}

}  // namespace

void register_bench_steps(CLI::App& bench, CommandRunner& run) {
  auto* cmd = bench.add_subcommand(
      kBenchSteps,
      "Step times: decode, verify, drafter propose and prefill, with bytes moved and the roofline; prefill "
      "tokens/s and time to first token per prompt length; the steps at long contexts; the bf16 GEMM rate");
  auto a = std::make_shared<StepsArgs>();
  add_bench_model_flags(*cmd, a->models);
  auto* contexts =
      cmd->add_option("--contexts", a->step.contexts,
                      "Context lengths (positions a sequence holds before the timed steps): the batch tables run at "
                      "the first; one sequence's decode, verify (largest --verify-k) and propose run at each, with "
                      "the ratio to the first and the KV-read bandwidth")
          ->delimiter(',')
          ->capture_default_str();
  cmd->add_option("--context", a->context_alias, "One context length: the same as --contexts with one entry")
      ->excludes(contexts);
  cmd->add_option("--prefill", a->step.prefill_lengths,
                  "Prompt lengths of the prefill table: tokens/s, time to first token and the effective matmul "
                  "TFLOP/s of each (lengths whose KV does not fit are skipped with a note)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--prefill-chunk", a->step.prefill_chunk,
                  "Prefill chunk length (the engine's default, as `serve --prefill-chunk`)")
      ->capture_default_str();
  cmd->add_option("--kv-cache-mib", a->kv_cache_mib,
                  "KV cache (and DeltaNet state) the bench may hold at once, in MiB; a measurement needing more is "
                  "skipped (0 = 90% of the free device memory after the weights, half the RAM on the CPU)")
      ->capture_default_str();
  cmd->add_option("--iterations", a->step.iterations,
                  "Timed calls per measurement (the median is reported); prompts over 8,192 tokens are timed "
                  "iterations x 8192 / length times, at least once")
      ->capture_default_str();
  cmd->add_option("--tau", a->step.tau, "Acceptance length for the projected tokens/s")->capture_default_str();
  cmd->add_option("--decode-batches", a->step.decode_batches, "Decode batch sizes")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--verify-batches", a->step.verify_batches, "Verify and propose batch sizes")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--verify-k", a->step.verify_ks, "Verify rows per sequence")->delimiter(',')->capture_default_str();
  cmd->add_flag("--json", a->json, "Print JSON instead of tables");
  cmd->add_flag("--steps", a->legacy_steps, "Old spelling of this mode")->group("");
  cmd->callback([&run, a] { run = [a] { return run_steps(*a); }; });
}

}  // namespace specserve::cli
