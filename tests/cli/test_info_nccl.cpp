// `specserve info --nccl [--nccl-library PATH]`: loads NCCL as tensor parallelism on GPUs would and prints
// what it found, or fails with the loader's one-line reason (backend/nccl_library.h).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/error.h"

namespace specserve::cli {
namespace {

struct InfoCli {
  CLI::App app{"specserve", "specserve"};
  CommandRunner run;
  InfoCli() {
    app.require_subcommand(1);
    register_commands(app, run);
  }
  void parse(std::vector<std::string> words) {
    words.insert(words.begin(), "specserve");
    std::vector<char*> argv;
    for (auto& w : words) argv.push_back(w.data());
    app.parse(static_cast<int>(argv.size()), argv.data());
  }
};

TEST(InfoNccl, AMissingLibraryFailsNamingIt) {
  InfoCli cli;
  cli.parse({"info", "--nccl", "--nccl-library", "/nonexistent/specserve-test/libnccl.so.2"});
  ASSERT_TRUE(cli.run);
  try {
    cli.run();
    FAIL() << "a missing --nccl-library loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/specserve-test/libnccl.so.2"), std::string::npos) << e.what();
  }
}

TEST(InfoNccl, TheLibraryFlagNeedsNcclAndExcludesTheOtherModes) {
  for (const std::vector<std::string>& line : {std::vector<std::string>{"info", "--nccl-library", "/x/libnccl.so.2"},
                                               std::vector<std::string>{"info", "--nccl", "--env"},
                                               std::vector<std::string>{"info", "--nccl", "--model", "m"}}) {
    InfoCli cli;
    EXPECT_THROW(cli.parse(line), CLI::ParseError) << line[1] << " " << line[2];
  }
  InfoCli cli;
  EXPECT_NO_THROW(cli.parse({"info", "--nccl"}));
}

}  // namespace
}  // namespace specserve::cli
