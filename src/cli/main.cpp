// specserve: generate | serve | tokenize | chat-template | bench | info
#include <cstdio>
#include <exception>

#include "cli/commands.h"
#include "core/error.h"

int main(int argc, char** argv) {
  CLI::App app{"specserve — LLM inference server with lossless DFlash speculative decoding", "specserve"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "specserve 0.1.0");

  specserve::cli::CommandRunner run;
  specserve::cli::register_generate(app, run);
  specserve::cli::register_serve(app, run);
  specserve::cli::register_tokenize(app, run);
  specserve::cli::register_chat_template(app, run);
  specserve::cli::register_bench(app, run);
  specserve::cli::register_draft_vocab(app, run);
  specserve::cli::register_info(app, run);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    return run ? run() : 1;
  } catch (const specserve::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
