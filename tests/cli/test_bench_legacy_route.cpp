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

// The note names the old first flag even when routing reallocates the arguments (it once read that flag
// through a reference into the vector it had just grown: a use after free, which the sanitizer build reports;
// a release build happened to read the old bytes).
TEST(BenchLegacyRoute, TheNoteNamesTheFlagWhenTheArgumentsMove) {
  for (const std::string flag : {"--synthetic", "--synthetic=a-long-synthetic-shape-name"}) {
    std::vector<std::string> args{"specserve", "bench", flag, "--iterations", "5"};
    args.shrink_to_fit();  // no room left: the insert must move every argument
    const std::string note = route_legacy_bench(args);
    EXPECT_EQ(note, "note: `specserve bench " + flag + " ...` is now `specserve bench steps " + flag +
                        " ...`; see `specserve bench --help`");
    EXPECT_EQ(args, (Args{"specserve", "bench", "steps", flag, "--iterations", "5"}));
  }
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
