#include "cli/commands.h"

namespace specserve::cli {

void register_commands(CLI::App& app, CommandRunner& run) {
  register_generate(app, run);
  register_serve(app, run);
  register_tokenize(app, run);
  register_chat_template(app, run);
  register_bench(app, run);
  register_draft_vocab(app, run);
  register_info(app, run);
}

}  // namespace specserve::cli
