// Per-request speculation stats and their JSON (`generate --json` / `--trace`), and the CLI-mode
// combination rules.
#include <gtest/gtest.h>

#include "core/error.h"
#include "spec/dflash_proposer.h"
#include "spec/spec_json.h"
#include "spec/spec_stats.h"

namespace specserve::spec {
namespace {

std::vector<engine::SpecStep> steps() {
  return {
      {10, {1, 2, 3}, 2, {1, 2, 9}},  // two of three accepted
      {13, {4, 5, 6}, 0, {7}},        // none
      {14, {8}, 1, {8, 4}},           // a short step near max_tokens: the one draft accepted
      {16, {}, 0, {5}},               // the last token: a plain decode step
  };
}

TEST(SpecStats, CountsStepsAcceptanceAndPerPositionRates) {
  const SpecStats s = spec_stats(steps());
  EXPECT_EQ(s.steps, 4);
  EXPECT_EQ(s.accepted_total, 3);
  EXPECT_DOUBLE_EQ(s.tau, (3 + 1 + 2 + 1) / 4.0);
  // Position 0 was drafted in 3 steps and accepted in 2; positions 1 and 2 in 2 steps, 1 and 0.
  ASSERT_EQ(s.accept_rate_per_position.size(), 3u);
  EXPECT_DOUBLE_EQ(s.accept_rate_per_position[0], 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(s.accept_rate_per_position[1], 0.5);
  EXPECT_DOUBLE_EQ(s.accept_rate_per_position[2], 0.0);
  EXPECT_EQ(spec_stats({}).tau, 0.0);
}

TEST(SpecJson, AddsStatsAndTheTraceOnlyWhenAsked) {
  nlohmann::ordered_json root;
  root["stats"] = {{"prompt_tokens", 10}};
  const auto st = steps();
  add_spec_json(st, false, root);
  EXPECT_EQ(root["stats"]["prompt_tokens"], 10);
  EXPECT_EQ(root["stats"]["steps"], 4);
  EXPECT_EQ(root["stats"]["accepted_total"], 3);
  EXPECT_DOUBLE_EQ(root["stats"]["tau"].get<double>(), 1.75);
  EXPECT_EQ(root["stats"]["accept_rate_per_position"].size(), 3u);
  EXPECT_FALSE(root.contains("steps"));
  add_spec_json(st, true, root);
  ASSERT_EQ(root["steps"].size(), 4u);
  EXPECT_EQ(root["steps"][0].dump(), R"({"pos":10,"drafts":[1,2,3],"accepted":2,"emitted":[1,2,9]})");
}

TEST(ProposerOptions, RawArgmaxVerifyDraftsRawAndRefusesSampledDrafts) {
  const auto o = proposer_options(7, DraftSampling::Argmax, engine::VerifyMode::RawArgmax);
  EXPECT_EQ(o.gamma, 7);
  EXPECT_TRUE(o.selection.raw);
  EXPECT_FALSE(proposer_options(0, DraftSampling::Sample, engine::VerifyMode::SampleMatch).selection.raw);
  EXPECT_THROW(proposer_options(0, DraftSampling::Sample, engine::VerifyMode::RawArgmax), Error);
  EXPECT_EQ(engine::parse_verify_mode("raw-argmax"), engine::VerifyMode::RawArgmax);
  EXPECT_THROW(engine::parse_verify_mode("argmax"), Error);
}

}  // namespace
}  // namespace specserve::spec
