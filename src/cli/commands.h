#pragma once
// Each `specserve` subcommand lives in its own cmd_*.cpp and registers itself here.
#include <CLI/CLI.hpp>

#include <functional>

namespace specserve::cli {

// A subcommand's body runs after parsing; it returns the process exit code.
using CommandRunner = std::function<int()>;

// Each registers its subcommand (options and help) and stores the runner to call when chosen.
void register_info(CLI::App& app, CommandRunner& run);
void register_generate(CLI::App& app, CommandRunner& run);
void register_serve(CLI::App& app, CommandRunner& run);
void register_tokenize(CLI::App& app, CommandRunner& run);
void register_chat_template(CLI::App& app, CommandRunner& run);
void register_bench(CLI::App& app, CommandRunner& run);
void register_draft_vocab(CLI::App& app, CommandRunner& run);

// All of the above, in the order `specserve --help` lists them (main.cpp and the CLI tests).
void register_commands(CLI::App& app, CommandRunner& run);

}  // namespace specserve::cli
