// The command lines of `specserve bench` from before it had modes still run, routed to the mode they
// meant, with a note that names the new spelling; the new spellings and help are left alone.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/bench_modes.h"

namespace specserve::cli {
namespace {

std::vector<std::string> route(std::vector<std::string> args, std::string* note = nullptr) {
  args.insert(args.begin(), "specserve");
  const std::string n = route_legacy_bench(args);
  if (note) *note = n;
  return {args.begin() + 1, args.end()};
}

using Args = std::vector<std::string>;

TEST(BenchLegacyRoute, SyntheticAndStepsGoToSteps) {
  std::string note;
  EXPECT_EQ(route({"bench", "--synthetic", "qwen3-8b", "--iterations", "5"}, &note),
            (Args{"bench", "steps", "--synthetic", "qwen3-8b", "--iterations", "5"}));
  EXPECT_NE(note.find("specserve bench steps"), std::string::npos) << note;
  EXPECT_EQ(route({"bench", "--synthetic=tiny"}), (Args{"bench", "steps", "--synthetic=tiny"}));
  EXPECT_EQ(route({"bench", "--model", "m", "--steps"}), (Args{"bench", "steps", "--model", "m", "--steps"}));
}

TEST(BenchLegacyRoute, ServingFlagsGoToServeLoad) {
  std::string note;
  EXPECT_EQ(route({"bench", "--model", "m", "--concurrency", "1,4"}, &note),
            (Args{"bench", "serve-load", "--model", "m", "--concurrency", "1,4"}));
  EXPECT_NE(note.find("specserve bench serve-load"), std::string::npos) << note;
  EXPECT_EQ(route({"bench", "--url", "http://h:1"}), (Args{"bench", "serve-load", "--url", "http://h:1"}));
}

TEST(BenchLegacyRoute, NewSpellingsAndHelpAreLeftAlone) {
  for (const Args& a : {Args{"bench", "steps", "--synthetic", "tiny"}, Args{"bench", "serve-load", "--model", "m"},
                        Args{"bench"}, Args{"bench", "--help"}, Args{"bench", "-h"}, Args{"serve", "--model", "m"},
                        Args{"generate", "--synthetic", "x"}}) {
    std::string note = "unset";
    EXPECT_EQ(route(a, &note), a);
    EXPECT_EQ(note, "");
  }
}

}  // namespace
}  // namespace specserve::cli
