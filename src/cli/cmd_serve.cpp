// `specserve serve`: placeholder registration until its issue lands; prints --help and refuses to run.
#include <cstdio>

#include "cli/commands.h"

namespace specserve::cli {

void register_serve(CLI::App& app, CommandRunner& run) {
  auto* cmd = app.add_subcommand("serve", "(serve is not implemented yet in this build)");
  cmd->allow_extras();
  cmd->callback([&run] {
    run = [] {
      std::fprintf(stderr, "error: 'specserve serve' is not implemented yet in this build\n");
      return 2;
    };
  });
}

}  // namespace specserve::cli
