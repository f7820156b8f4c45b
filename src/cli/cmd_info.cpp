// `specserve info --model DIR [--json]`: what a checkpoint is (architecture, layer schedule,
// parameters per dtype, head, weight layout, drafter settings), after checking that every tensor
// its config implies is present. The work is io/model_summary; this file is the command line.
// `specserve info --env`: the environment variables specserve reads (core/env_registry.h).
// `specserve info --nccl [--nccl-library PATH]`: the NCCL that tensor parallelism on GPUs would load
// (backend/nccl_library.h), or the one-line reason none loads.
// `specserve info --model DIR --tensor-parallel N`: also the partition of the target over N ranks
// (model/tensor_parallel_plan.h), read from the config alone, or the one-line reason it does not divide.
#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "backend/nccl_library.h"
#include "cli/commands.h"
#include "core/env_registry.h"
#include "io/model_config.h"
#include "io/model_summary.h"
#include "model/tensor_parallel_plan.h"

namespace specserve::cli {

void register_info(CLI::App& app, CommandRunner& run) {
  struct Options {
    std::string model;
    bool json = false;
    bool env = false;
    bool nccl = false;
    std::string nccl_library;
    int tensor_parallel = 1;
  };
  auto opts = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(
      "info",
      "Describe a checkpoint: architecture, layer schedule, parameters per dtype, head, weight layout, "
      "drafter settings; fails if a tensor the config implies is missing");
  auto* model = cmd->add_option("--model", opts->model, "Model directory (config.json and *.safetensors)");
  cmd->add_flag("--json", opts->json, "Print one JSON object instead of text");
  auto* env = cmd->add_flag("--env", opts->env,
                            "Instead: list the environment variables specserve reads (off-switches and debugging "
                            "aids), with their defaults and the values this process sees");
  auto* nccl = cmd->add_flag("--nccl", opts->nccl,
                             "Instead: load NCCL as --tensor-parallel on GPUs would (libnccl.so.2 on the loader's "
                             "path, or --nccl-library) and print its file and version");
  cmd->add_option("--nccl-library", opts->nccl_library,
                  "With --nccl: this libnccl.so.2 file instead of the loader's search (e.g. PyTorch's "
                  "<site-packages>/nvidia/nccl/lib/libnccl.so.2)")
      ->needs(nccl);
  cmd->add_option("--tensor-parallel", opts->tensor_parallel,
                  "With --model: also show how --tensor-parallel N would split its target over N ranks (heads, "
                  "MLP columns, vocabulary rows per rank), or why it cannot")
      ->check(CLI::Range(1, 64))
      ->needs(model);
  model->excludes(env);
  model->excludes(nccl);
  env->excludes(nccl);
  cmd->callback([&run, opts] {
    if (!opts->env && !opts->nccl && opts->model.empty()) throw CLI::RequiredError("--model");
    run = [opts] {
      if (opts->nccl) {
        const auto lib = nccl::load_nccl_library(opts->nccl_library);
        const std::string line = fmt::format("NCCL {} ({})\n", lib->version_text(), lib->path());
        std::fwrite(line.data(), 1, line.size(), stdout);
        return 0;
      }
      if (opts->env) {
        const std::string table = format_env_registry();
        std::fwrite(table.data(), 1, table.size(), stdout);
        return 0;
      }
      const ModelSummary summary = summarize_model(opts->model);
      std::string text = opts->json ? format_summary_json(summary) : format_summary_text(summary);
      if (opts->tensor_parallel > 1) {
        const TensorParallelPlan plan = plan_tensor_parallel(load_model_config(opts->model), opts->tensor_parallel);
        if (opts->json) {
          nlohmann::json j = nlohmann::json::parse(text), shares = nlohmann::json::array();
          auto range = [](const IndexRange& r) { return nlohmann::json::array({r.begin, r.end}); };
          for (const RankShare& r : plan.shares)
            shares.push_back({{"q_heads", range(r.q_heads)},
                              {"kv_heads", range(r.kv_heads)},
                              {"deltanet_k_heads", range(r.gdn_k_heads)},
                              {"deltanet_v_heads", range(r.gdn_v_heads)},
                              {"mlp_columns", range(r.mlp_columns)},
                              {"vocab_rows", range(r.vocab_rows)}});
          j["tensor_parallel"] = {{"ranks", plan.ranks}, {"kv_replicas", plan.kv_replicas}, {"shares", shares}};
          text = j.dump(2) + "\n";
        } else {
          text += fmt::format("\ntensor parallel over {} ranks (docs/DESIGN.md 6.1):\n{}", plan.ranks, plan.describe());
        }
      }
      std::fwrite(text.data(), 1, text.size(), stdout);
      return 0;
    };
  });
}

}  // namespace specserve::cli
