// specserve: generate | serve | tokenize | chat-template | bench steps | bench serve-load | draft-vocab | info
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "cli/bench_modes.h"
#include "cli/commands.h"
#include "core/error.h"

int main(int argc, char** argv) {
  CLI::App app{"specserve — LLM inference server with lossless DFlash speculative decoding", "specserve"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "specserve 0.1.0");

  specserve::cli::CommandRunner run;
  specserve::cli::register_commands(app, run);

  std::vector<std::string> args(argv, argv + argc);
  const std::string note = specserve::cli::route_legacy_bench(args);
  if (!note.empty()) std::fprintf(stderr, "%s\n", note.c_str());
  std::vector<char*> routed;
  for (std::string& a : args) routed.push_back(a.data());
  try {
    app.parse(static_cast<int>(routed.size()), routed.data());
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const specserve::Error& e) {  // a flag's own check (e.g. --max-body-mib) failed
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
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
