// `specserve info --model DIR [--json]`: what a checkpoint is (architecture, layer schedule,
// parameters per dtype, head, weight layout, drafter settings), after checking that every tensor
// its config implies is present. The work is io/model_summary; this file is the command line.
// `specserve info --env`: the environment variables specserve reads (core/env_registry.h).
// `specserve info --nccl [--nccl-library PATH]`: the NCCL that tensor parallelism on GPUs would load
// (backend/nccl_library.h), or the one-line reason none loads.
#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <string>

#include "backend/nccl_library.h"
#include "cli/commands.h"
#include "core/env_registry.h"
#include "io/model_summary.h"

namespace specserve::cli {

void register_info(CLI::App& app, CommandRunner& run) {
  struct Options {
    std::string model;
    bool json = false;
    bool env = false;
    bool nccl = false;
    std::string nccl_library;
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
      const std::string text = opts->json ? format_summary_json(summary) : format_summary_text(summary);
      std::fwrite(text.data(), 1, text.size(), stdout);
      return 0;
    };
  });
}

}  // namespace specserve::cli
