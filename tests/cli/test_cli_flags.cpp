// The `specserve` command line as users type it: every command keeps its flags (a rename keeps the old
// name as a hidden alias), the drafter flags are one set with one help text wherever a drafter loads,
// units are in the names of flags that take seconds, and `bench` has one subcommand per measurement.
// The commands are registered exactly as main.cpp registers them; nothing here loads a model.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/error.h"

namespace specserve::cli {
namespace {

struct Cli {
  CLI::App app{"specserve", "specserve"};
  CommandRunner run;
  Cli() {
    app.require_subcommand(1);
    register_commands(app, run);
  }
  CLI::App* command(const std::string& path) {
    CLI::App* a = &app;
    size_t i = 0;
    while (i < path.size()) {
      size_t j = path.find(' ', i);
      if (j == std::string::npos) j = path.size();
      a = a->get_subcommand(path.substr(i, j - i));
      i = j + 1;
    }
    return a;
  }
  // Parses `line` (words after the program name); throws CLI::ParseError as the binary would report it.
  void parse(const std::string& line) {
    std::vector<std::string> words{"specserve"};
    size_t i = 0;
    while (i < line.size()) {
      size_t j = line.find(' ', i);
      if (j == std::string::npos) j = line.size();
      words.push_back(line.substr(i, j - i));
      i = j + 1;
    }
    std::vector<char*> argv;
    for (auto& w : words) argv.push_back(w.data());
    app.parse(static_cast<int>(argv.size()), argv.data());
  }
};

bool visible(CLI::App* cmd, const std::string& flag) {
  const CLI::Option* o = cmd->get_option_no_throw(flag);
  return o != nullptr && !o->get_group().empty();
}
bool hidden(CLI::App* cmd, const std::string& flag) {
  const CLI::Option* o = cmd->get_option_no_throw(flag);
  return o != nullptr && o->get_group().empty();
}

const std::vector<std::string> kDrafterGenerate = {"--draft", "--draft-matmul",   "--draft-vocab",
                                                   "--gamma", "--draft-sampling", "--verify-mode"};

TEST(CliFlags, EveryCommandKeepsItsFlags) {
  Cli cli;
  const std::vector<std::pair<std::string, std::vector<std::string>>> expected = {
      {"generate",
       {"--model", "--prompt", "--prompt-ids", "--prompt-file", "--chat", "--json", "--threads", "--dtype",
        "--kv-dtype", "--fp8-weights", "--backend", "--max-tokens", "--temperature", "--seed", "--trace",
        "--tensor-parallel"}},
      {"serve",
       {"--model",
        "--host",
        "--port",
        "--served-model-name",
        "--api-key",
        "--max-seqs",
        "--max-queue",
        "--max-batch-rows",
        "--prefill-chunk",
        "--kv-cache-mib",
        "--threads",
        "--dtype",
        "--kv-dtype",
        "--fp8-weights",
        "--backend",
        "--max-tokens-limit",
        "--default-max-tokens",
        "--max-prompt-tokens",
        "--max-body-mib",
        "--request-timeout-s",
        "--http-threads",
        "--read-timeout-s",
        "--write-timeout-s",
        "--shutdown-grace-s",
        "--spec-max-batch",
        "--draft-policy",
        "--step-cost-profile"}},
      {"bench steps", {"--synthetic",   "--model",          "--draft",          "--draft-matmul",
                       "--draft-vocab", "--backend",        "--threads",        "--dtype",
                       "--kv-dtype",    "--fp8-weights",    "--context",        "--contexts",
                       "--prefill",     "--prefill-chunk",  "--kv-cache-mib",   "--iterations",
                       "--tau",         "--decode-batches", "--verify-batches", "--verify-k",
                       "--json",        "--tensor-parallel"}},
      {"bench serve-load",
       {"--model",
        "--url",
        "--api-key",
        "--served-model-name",
        "--concurrency",
        "--rounds",
        "--requests",
        "--max-tokens",
        "--prompt-words",
        "--temperature",
        "--prompt-id-pattern",
        "--threads",
        "--dtype",
        "--kv-dtype",
        "--fp8-weights",
        "--backend",
        "--max-batch-rows",
        "--spec-max-batch",
        "--workload",
        "--system-prompt-words",
        "--turns",
        "--turn-words",
        "--conversations",
        "--poll-ms",
        "--max-seqs",
        "--kv-cache-mib",
        "--swap-space-gib",
        "--no-prefix-cache",
        "--prefix-cache-state-interval",
        "--acceptance",
        "--seed",
        "--tensor-parallel"}},
      {"bench controlled",
       {"--synthetic", "--model", "--draft", "--draft-matmul", "--draft-vocab", "--gamma", "--acceptance",
        "--concurrency", "--requests", "--prompt-tokens", "--max-tokens", "--temperature", "--seed", "--backend",
        "--threads", "--dtype", "--kv-dtype", "--fp8-weights", "--tensor-parallel"}},
      {"bench step-costs",
       {"--synthetic", "--model", "--draft", "--draft-matmul", "--draft-vocab", "--backend", "--threads", "--dtype",
        "--kv-dtype", "--fp8-weights", "--max-seqs", "--gamma", "--kv-cache-mib", "--out", "--tensor-parallel"}},
      {"tokenize", {"--tokenizer", "--input-jsonl"}},
      {"chat-template", {"--tokenizer", "--request-file"}},
      {"draft-vocab", {"--tokenizer", "--top"}},
      {"info", {"--model", "--json", "--tensor-parallel"}},
  };
  for (const auto& [path, flags] : expected) {
    CLI::App* cmd = cli.command(path);
    for (const auto& f : flags) EXPECT_TRUE(visible(cmd, f)) << path << " lost " << f;
  }
  for (const char* path : {"generate", "serve", "bench serve-load"})
    for (const auto& f : kDrafterGenerate) EXPECT_TRUE(visible(cli.command(path), f)) << path << " lost " << f;
}

TEST(CliFlags, DrafterFlagsAreOneSet) {
  Cli cli;
  CLI::App* generate = cli.command("generate");
  for (const char* path : {"serve", "bench serve-load", "bench steps"}) {
    CLI::App* cmd = cli.command(path);
    for (const auto& f : kDrafterGenerate) {
      const CLI::Option* o = cmd->get_option_no_throw(f);
      if (o == nullptr) continue;  // bench steps takes the forward's flags only
      const CLI::Option* g = generate->get_option_no_throw(f);
      EXPECT_EQ(o->get_description(), g->get_description()) << path << " " << f;
      EXPECT_EQ(o->get_default_str(), g->get_default_str()) << path << " " << f;
    }
  }
  // A flag that does not change a forward is not offered where only forwards are timed.
  for (const char* f : {"--gamma", "--draft-sampling", "--verify-mode", "--spec-max-batch"})
    EXPECT_EQ(cli.command("bench steps")->get_option_no_throw(f), nullptr) << f;
  for (const char* f : {"--backend", "--threads", "--dtype", "--kv-dtype", "--fp8-weights", "--tensor-parallel"}) {
    const CLI::Option* g = generate->get_option(f);
    for (const char* path : {"serve", "bench steps", "bench serve-load", "bench controlled", "bench step-costs"}) {
      const CLI::Option* o = cli.command(path)->get_option(f);
      EXPECT_EQ(o->get_description(), g->get_description()) << path << " " << f;
      EXPECT_EQ(o->get_default_str(), g->get_default_str()) << path << " " << f;
    }
  }
}

TEST(CliFlags, RenamedFlagsKeepTheirOldNamesHidden) {
  Cli cli;
  for (const char* f : {"--request-timeout", "--read-timeout", "--write-timeout", "--shutdown-grace"})
    EXPECT_TRUE(hidden(cli.command("serve"), f)) << f;
  EXPECT_TRUE(hidden(cli.command("bench serve-load"), "--served-model"));
  EXPECT_TRUE(hidden(cli.command("bench serve-load"), "--prompt-ids"));
  EXPECT_TRUE(hidden(cli.command("bench steps"), "--steps"));
  EXPECT_NO_THROW(
      cli.parse("serve --model m --shutdown-grace 3 --request-timeout 5 --read-timeout 1 "
                "--write-timeout 2"));
  Cli again;
  EXPECT_NO_THROW(again.parse("bench serve-load --model m --served-model x --prompt-ids 1,2,3"));
}

TEST(CliFlags, BadValuesAreParseErrors) {
  for (const char* line :
       {"generate --model m --backend gpu", "serve --model m --draft-matmul slow",
        "generate --model m --draft-sampling greedy", "serve --model m --verify-mode exact",
        "generate --model m --dtype f16", "serve --model m --gamma -1", "serve --model m --kv-dtype f16",
        "bench steps --synthetic 8b --kv-dtype fp8", "serve --model m --max-body-mib abc",
        "serve --model m --max-body-mib 0", "serve --model m --max-body-mib -3", "generate --model m --fp8-weights fp8",
        "serve --model m --fp8-weights dequantize"}) {
    Cli cli;
    EXPECT_THROW(cli.parse(line), CLI::ParseError) << line;
  }
}

// --kv-dtype takes auto (the default: f32 for f32 weights, else bf16), bf16 or f32 on every command that
// loads a target.
TEST(CliFlags, KvDtypeParses) {
  for (const char* path : {"generate", "serve", "bench steps", "bench serve-load"}) {
    Cli cli;
    EXPECT_EQ(cli.command(path)->get_option("--kv-dtype")->get_default_str(), "auto") << path;
  }
  for (const char* line : {"serve --model m --kv-dtype bf16", "serve --model m --kv-dtype f32",
                           "serve --model m --kv-dtype auto", "bench serve-load --model m --kv-dtype f32"}) {
    Cli cli;
    EXPECT_NO_THROW(cli.parse(line)) << line;
  }
}

TEST(CliFlags, DrafterOnlyFlagsNeedADrafter) {
  // Checked before anything loads, so the missing model directory is never reached.
  for (const char* line :
       {"generate --model /nonexistent --prompt x --max-tokens 1 --gamma 3",
        "serve --model /nonexistent --spec-max-batch 4", "bench serve-load --model /nonexistent --draft-vocab 64",
        "bench steps --model /nonexistent --draft-matmul exact"}) {
    Cli cli;
    ASSERT_NO_THROW(cli.parse(line)) << line;
    try {
      cli.run();
      ADD_FAILURE() << line << " ran";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--draft DIR"), std::string::npos) << line << ": " << e.what();
    }
  }
}

TEST(CliFlags, BenchNeedsAMode) {
  Cli cli;
  EXPECT_THROW(cli.parse("bench"), CLI::ParseError);
  Cli steps;
  EXPECT_NO_THROW(steps.parse("bench steps --synthetic tiny --iterations 1"));
  Cli load;
  EXPECT_NO_THROW(load.parse("bench serve-load --url http://127.0.0.1:1 --concurrency 1"));
  Cli workload;
  EXPECT_NO_THROW(workload.parse("bench serve-load --url http://127.0.0.1:1 --workload multi-turn --turns 3"));
  Cli unknown;
  EXPECT_THROW(unknown.parse("bench serve-load --url http://127.0.0.1:1 --workload everything"), CLI::ParseError);
  Cli cache;
  EXPECT_NO_THROW(
      cache.parse("bench serve-load --url http://127.0.0.1:1 --no-prefix-cache --prefix-cache-state-interval 512"));
  for (const char* interval : {"100", "0", "x"}) {
    Cli bad;
    EXPECT_THROW(
        bad.parse(std::string("bench serve-load --url http://127.0.0.1:1 --prefix-cache-state-interval ") + interval),
        CLI::ParseError)
        << interval;
  }
  Cli mixed;  // a serving flag is not a step-benchmark flag
  EXPECT_THROW(mixed.parse("bench steps --synthetic tiny --concurrency 1"), CLI::ParseError);
}

}  // namespace
}  // namespace specserve::cli
