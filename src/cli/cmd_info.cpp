// `specserve info --model DIR [--json]`: what a checkpoint is (architecture, layer schedule,
// parameters per dtype, head, weight layout, drafter settings), after checking that every tensor
// its config implies is present. The work is io/model_summary; this file is the command line.
// `specserve info --env`: the environment variables specserve reads (core/env_registry.h).
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "core/env_registry.h"
#include "io/model_summary.h"

namespace specserve::cli {

void register_info(CLI::App& app, CommandRunner& run) {
  struct Options {
    std::string model;
    bool json = false;
    bool env = false;
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
  model->excludes(env);
  cmd->callback([&run, opts] {
    if (!opts->env && opts->model.empty()) throw CLI::RequiredError("--model");
    run = [opts] {
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
