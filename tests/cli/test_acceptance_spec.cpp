// The --acceptance strings of `specserve bench controlled` (io/acceptance_spec.h): the two forms parse,
// a geometric τ gives the per-draft probability whose expected tokens per verify is τ, and every bad
// string is an Error that names the problem, also through the command line's parse.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/error.h"
#include "io/acceptance_spec.h"

namespace specserve {
namespace {

TEST(AcceptanceSpec, GeometricGivesTauTokensPerVerify) {
  const AcceptanceSpec spec = parse_acceptance_spec("geometric:6.5");
  EXPECT_EQ(spec.kind, AcceptanceSpec::Kind::Geometric);
  EXPECT_EQ(spec.label(), "geometric τ=6.5");
  for (int gamma : {6, 7, 15}) {
    const std::vector<double> c = spec.conditional(gamma);
    ASSERT_EQ(c.size(), static_cast<size_t>(gamma));
    EXPECT_NEAR(verify_tokens(c).mean, 6.5, 1e-9) << gamma;
  }
  EXPECT_DOUBLE_EQ(geometric_keep_probability(1, 15), 0);  // every draft wrong
  EXPECT_NEAR(geometric_keep_probability(16, 15), 1, 1e-12);
  EXPECT_NEAR(geometric_keep_probability(2, 1), 1, 1e-12);
  EXPECT_THROW(spec.conditional(5), Error);  // 5 drafts give at most 6 tokens
}

TEST(AcceptanceSpec, ProfileIsPerPositionAndWrongPastItsEnd) {
  const AcceptanceSpec spec = parse_acceptance_spec("profile:0.9,0.5,1");
  EXPECT_EQ(spec.kind, AcceptanceSpec::Kind::Profile);
  EXPECT_EQ(spec.label(), "profile 0.9,0.5,1");
  EXPECT_EQ(spec.conditional(5), (std::vector<double>{0.9, 0.5, 1, 0, 0}));
  EXPECT_EQ(spec.conditional(2), (std::vector<double>{0.9, 0.5}));
  // A = accepted drafts: P(A>=1) = 0.9, P(A>=2) = P(A>=3) = 0.45.
  const VerifyTokens v = verify_tokens(spec.conditional(3));
  EXPECT_NEAR(v.mean, 1 + 0.9 + 0.45 + 0.45, 1e-12);
  const double second = 0.1 * 0 + 0.45 * 1 + 0 * 4 + 0.45 * 9;
  EXPECT_NEAR(v.variance, second - 1.8 * 1.8, 1e-12);
}

TEST(AcceptanceSpec, BadStringsAreClearErrors) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"", "has no kind"},
      {"6.5", "has no kind"},
      {"binomial:3", "unknown kind 'binomial'"},
      {"geometric:", "is not a number"},
      {"geometric:six", "'six' is not a number"},
      {"geometric:6.5x", "is not a number"},
      {"geometric:nan", "is not a number"},
      {"geometric:inf", "is not a number"},
      {"geometric:0.5", "at least 1"},
      {"profile:", "is not a number"},
      {"profile:0.9,,0.8", "'' is not a number"},
      {"profile:0.9,1.5", "outside [0, 1]"},
      {"profile:-0.1", "outside [0, 1]"},
  };
  for (const auto& [text, message] : bad) {
    try {
      parse_acceptance_spec(text);
      ADD_FAILURE() << "'" << text << "' was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << text << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find("--acceptance"), std::string::npos) << e.what();
    }
  }
}

// The flag refuses a bad string when the command line is parsed, before any weights are made.
TEST(AcceptanceSpec, BadFlagIsACommandLineError) {
  auto parse = [](std::vector<std::string> words) {
    CLI::App app{"specserve", "specserve"};
    cli::CommandRunner run;
    app.require_subcommand(1);
    cli::register_commands(app, run);
    words.insert(words.begin(), "specserve");
    std::vector<char*> argv;
    for (auto& w : words) argv.push_back(w.data());
    app.parse(static_cast<int>(argv.size()), argv.data());
  };
  EXPECT_NO_THROW(parse({"bench", "controlled", "--synthetic", "tiny", "--acceptance", "profile:0.9,0.8"}));
  try {
    parse({"bench", "controlled", "--synthetic", "tiny", "--acceptance", "geometric:0.5"});
    ADD_FAILURE() << "accepted";
  } catch (const CLI::ValidationError& e) {
    EXPECT_NE(std::string(e.what()).find("at least 1"), std::string::npos) << e.what();
  }
  // No serving command has the flag: the controlled proposer is a benchmark only.
  EXPECT_THROW(parse({"serve", "--model", "x", "--acceptance", "geometric:3"}), CLI::ParseError);
}

}  // namespace
}  // namespace specserve
