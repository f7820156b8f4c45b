// `specserve info --model DIR [--json]`: what a checkpoint is (architecture, layer schedule,
// parameters per dtype, head, weight layout, drafter settings), after checking that every tensor
// its config implies is present. The work is io/model_summary; this file is the command line.
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "io/model_summary.h"

namespace specserve::cli {

void register_info(CLI::App& app, CommandRunner& run) {
  struct Options {
    std::string model;
    bool json = false;
  };
  auto opts = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(
      "info", "Describe a checkpoint: architecture, layer schedule, parameters per dtype, head, weight layout, "
              "drafter settings; fails if a tensor the config implies is missing");
  cmd->add_option("--model", opts->model, "Model directory (config.json and *.safetensors)")->required();
  cmd->add_flag("--json", opts->json, "Print one JSON object instead of text");
  cmd->callback([&run, opts] {
    run = [opts] {
      const ModelSummary summary = summarize_model(opts->model);
      const std::string text = opts->json ? format_summary_json(summary) : format_summary_text(summary);
      std::fwrite(text.data(), 1, text.size(), stdout);
      return 0;
    };
  });
}

}  // namespace specserve::cli
