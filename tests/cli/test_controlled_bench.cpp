// `specserve bench controlled` on a tiny target + drafter pair (tests/fixtures/dflash): the controlled
// pass emits exactly the recorded plain tokens (T = 0 and seeded T > 0; run_controlled_bench throws
// otherwise), the tokens per verify track the requested profile within a bound computed from its
// variance, τ = 1 accepts nothing, a profile of certain drafts accepts exactly its length, and a
// recording that differs from what the target emits is an error, not a number.
#include <gtest/gtest.h>

#include <cmath>

#include "../spec/spec_test_util.h"
#include "../specserve_cli.h"
#include "cli/controlled_bench.h"
#include "cli/controlled_draft_proposer.h"

namespace specserve::cli {
namespace {

using namespace specserve::spec::testing;

ControlledBenchOptions options(const std::string& acceptance, float temperature = 0) {
  ControlledBenchOptions o;
  o.acceptance = parse_acceptance_spec(acceptance);
  o.concurrency = {1, 4};
  o.requests = 6;
  o.prompt_tokens = 24;
  o.max_tokens = 128;
  o.temperature = temperature;
  o.seed = 7;
  return o;
}

int64_t total(const ControlledBenchResult& r, int64_t ControlledLevel::*field) {
  int64_t n = 0;
  for (const auto& l : r.levels) n += l.*field;
  return n;
}

// Σ (accepted + 1) over all verifies is a sum of independent draws (each step's draw is keyed by its
// request and position); its expectation and variance given each step's draft count come from the
// profile. Four standard deviations: a correct process lands outside with probability < 1e-4 (normal
// approximation over hundreds of verifies); the seed is fixed, so the test is deterministic.
void expect_tracks_profile(const ControlledBenchResult& r) {
  for (const auto& l : r.levels) {
    ASSERT_GT(l.verifies, 150) << "too few verifies to measure acceptance";
    const double bound = 4 * std::sqrt(l.variance);
    EXPECT_NEAR(static_cast<double>(l.verify_tokens), l.expected_tokens, bound)
        << "concurrency " << l.concurrency << ": " << l.verifies << " verifies";
  }
}

TEST(ControlledBench, GeometricTauTracksAndOutputsMatchAtTZero) {
  Pair pair("dense-trained", "f32");
  const ControlledBenchResult r = run_controlled_bench(*pair.target, *pair.drafter, "pair", options("geometric:3"));
  EXPECT_EQ(r.gamma, 15);
  EXPECT_NEAR(r.requested_tau, 3, 1e-9);
  expect_tracks_profile(r);
  // Per verify, the expectation is τ except in the last steps, where fewer drafts are left.
  for (const auto& l : r.levels) EXPECT_NEAR(l.expected_tokens / l.verifies, 3, 0.3);
  const std::string table = format_controlled_bench(r, options("geometric:3"));
  EXPECT_NE(table.find("acceptance-controlled: geometric τ=3"), std::string::npos) << table;
}

TEST(ControlledBench, SeededSamplingMatchesAndTracks) {
  Pair pair("dense-trained", "f32");
  expect_tracks_profile(
      run_controlled_bench(*pair.target, *pair.drafter, "pair", options("geometric:4.5", /*temperature=*/0.8f)));
}

TEST(ControlledBench, TauOneAcceptsNothing) {
  Pair pair("hybrid-trained", "f32");
  ControlledBenchOptions o = options("geometric:1");
  o.max_tokens = 48;
  const ControlledBenchResult r = run_controlled_bench(*pair.target, *pair.drafter, "pair", o);
  EXPECT_GT(total(r, &ControlledLevel::verifies), 0);
  EXPECT_EQ(total(r, &ControlledLevel::verify_tokens), total(r, &ControlledLevel::verifies));
}

TEST(ControlledBench, ProfileForm) {
  Pair pair("dense-trained", "f32");
  // Drafts 1 and 2 always correct, 3 never: every verify with 3+ drafts commits exactly 3 tokens.
  ControlledBenchResult r = run_controlled_bench(*pair.target, *pair.drafter, "pair", options("profile:1,1,0"));
  for (const auto& l : r.levels) {
    EXPECT_EQ(l.variance, 0);
    EXPECT_EQ(static_cast<double>(l.verify_tokens), l.expected_tokens);
  }
  r = run_controlled_bench(*pair.target, *pair.drafter, "pair", options("profile:0.9,0.8,0.7,0.6,0.5"));
  expect_tracks_profile(r);
}

TEST(ControlledBench, DivergedRecordingIsAnError) {
  Pair pair("dense-trained", "f32");
  const std::vector<int32_t> prompt = {5, 9, 13, 2, 77, 31};
  auto plain_engine = make_engine(*pair.target, nullptr);
  std::vector<int32_t> output = run_request(*plain_engine, greedy_request(prompt, 24)).tokens;
  output[10] = (output[10] + 1) % 300;  // not what the target emits
  spec::DFlashProposer real(*pair.drafter, {.gamma = 15});
  ControlledDraftProposer controlled(real, {{prompt, output}}, std::vector<double>(15, 1.0), 1,
                                     pair.target->vocab_size());
  engine::EngineOptions eo = engine_options();
  eo.gamma = 15;
  auto engine = make_engine(*pair.target, &controlled, eo);
  const RequestRun run = run_request(*engine, greedy_request(prompt, 24));
  EXPECT_EQ(run.finish_reason, engine::FinishReason::Error);
  EXPECT_NE(run.error.find("differ from its recorded plain decoding"), std::string::npos) << run.error;
}

// The command end to end on the tiny synthetic shape: it runs, and every line it prints says it is
// acceptance-controlled (the table's rows in their last column).
TEST(ControlledBench, CommandLabelsEveryLine) {
  const auto r = specserve::testing::run_specserve(
      "bench controlled --synthetic tiny --backend cpu --concurrency 1,2 --prompt-tokens 16 --max-tokens 24 "
      "--acceptance geometric:2.5");
  ASSERT_EQ(r.status, 0) << r.out;
  size_t lines = 0;
  for (size_t i = 0; i < r.out.size();) {
    const size_t end = r.out.find('\n', i);
    const std::string line = r.out.substr(i, end - i);
    EXPECT_NE(line.find("controlled"), std::string::npos) << line;
    ++lines;
    i = end == std::string::npos ? r.out.size() : end + 1;
  }
  EXPECT_EQ(lines, 6u) << r.out;  // 2 header lines, the column names, 2 levels, the check
  EXPECT_NE(r.out.find("controlled geometric τ=2.5"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace specserve::cli
