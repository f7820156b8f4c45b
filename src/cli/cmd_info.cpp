// `specserve info`: placeholder until the io layer lands.
#include <cstdio>

#include "cli/commands.h"

namespace specserve::cli {

void register_info(CLI::App& app, CommandRunner& run) {
  auto* cmd = app.add_subcommand("info", "Describe a checkpoint (not implemented yet)");
  cmd->allow_extras();
  cmd->callback([&run] {
    run = [] {
      std::fprintf(stderr, "error: 'specserve info' is not implemented yet in this build\n");
      return 2;
    };
  });
}

}  // namespace specserve::cli
