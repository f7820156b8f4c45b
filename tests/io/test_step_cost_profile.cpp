// The step cost profile (io/step_cost_profile.h): what `bench step-costs` writes, `serve` reads back
// exactly; anything else is refused with a message naming the problem; a profile of another model,
// device or build is refused.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>

#include "core/error.h"
#include "io/step_cost_profile.h"

namespace specserve {
namespace {

StepCostProfile sample() {
  StepCostProfile p;
  p.model = "qwen3 hidden 4096";
  p.device = "NVIDIA H200";
  p.build = "specserve 1 bytes, modified 2";
  p.costs.row_knots = {1, 16, 256};
  p.costs.row_seconds = {0.006, 0.0065, 0.02};
  p.costs.sequence_s = 1e-5;
  p.costs.context_s = 2e-8;
  p.costs.row_context_s = 3e-9;
  p.costs.propose_s = 4e-4;
  p.costs.propose_sequence_s = 5e-5;
  p.costs.propose_context_s = 6e-9;
  p.costs.propose_draft_s = 7e-6;
  p.costs.plain_knots = {1, 16, 64};
  p.costs.plain_seconds = {0.0055, 0.006, 0.009};
  return p;
}

std::string error_of(const std::string& text) {
  try {
    parse_step_cost_profile(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "(accepted)";
}

std::string with(const std::string& key, const std::string& value) {
  nlohmann::json j = nlohmann::json::parse(write_step_cost_profile(sample()));
  if (value.empty())
    j.erase(key);
  else
    j[key] = nlohmann::json::parse(value);
  return j.dump();
}

TEST(StepCostProfile, RoundTrips) {
  const StepCostProfile p = sample();
  const StepCostProfile q = parse_step_cost_profile(write_step_cost_profile(p));
  EXPECT_EQ(q.model, p.model);
  EXPECT_EQ(q.device, p.device);
  EXPECT_EQ(q.build, p.build);
  EXPECT_EQ(q.costs.row_knots, p.costs.row_knots);
  EXPECT_EQ(q.costs.row_seconds, p.costs.row_seconds);
  EXPECT_EQ(q.costs.propose_context_s, p.costs.propose_context_s);
  EXPECT_EQ(q.costs.propose_draft_s, p.costs.propose_draft_s);
  EXPECT_EQ(q.costs.plain_knots, p.costs.plain_knots);
  EXPECT_EQ(q.costs.plain_seconds, p.costs.plain_seconds);
  EXPECT_NO_THROW(check_step_cost_profile_key(q, p.model, p.device, p.build));
  // Without a plain curve (costs whose steps were all of one kind): no keys, read back as none.
  StepCostProfile none = p;
  none.costs.plain_knots.clear();
  none.costs.plain_seconds.clear();
  const std::string text = write_step_cost_profile(none);
  EXPECT_EQ(text.find("plain_knots"), std::string::npos);
  EXPECT_TRUE(parse_step_cost_profile(text).costs.plain_knots.empty());
}

TEST(StepCostProfile, RefusesMalformedProfilesByName) {
  EXPECT_NE(error_of("{").find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_of("[]").find("not an object"), std::string::npos);
  EXPECT_NE(error_of(with("specserve_step_costs", "")).find("format version"), std::string::npos);
  EXPECT_NE(error_of(with("specserve_step_costs", "1")).find("format version 1"), std::string::npos);
  EXPECT_NE(error_of(with("specserve_step_costs", "2")).find("format version 2"), std::string::npos);
  EXPECT_NE(error_of(with("propose_draft_s", "")).find("'propose_draft_s' is missing"), std::string::npos);
  EXPECT_NE(error_of(with("extra", "1")).find("unknown key 'extra'"), std::string::npos);
  EXPECT_NE(error_of(with("model", "")).find("'model' is missing"), std::string::npos);
  EXPECT_NE(error_of(with("device", "3")).find("'device' is an integer"), std::string::npos);
  EXPECT_NE(error_of(with("row_knots", "[]")).find("'row_knots' has 0 entries"), std::string::npos);
  EXPECT_NE(error_of(with("row_knots", "[1, \"2\", 3]")).find("'row_knots'[1]"), std::string::npos);
  EXPECT_NE(error_of(with("row_knots", "[1, 4, 2]")).find("must increase"), std::string::npos);
  EXPECT_NE(error_of(with("row_knots", "[0, 4, 8]")).find("row knot 0"), std::string::npos);
  EXPECT_NE(error_of(with("row_seconds", "[0.1, 0.2]")).find("3 row knots but 2 row times"), std::string::npos);
  EXPECT_NE(error_of(with("row_seconds", "[0.3, 0.2, 0.4]")).find("must not decrease"), std::string::npos);
  EXPECT_NE(error_of(with("row_seconds", "[0, 0.2, 0.4]")).find("row time 0"), std::string::npos);
  EXPECT_NE(error_of(with("plain_knots", "")).find("'plain_seconds' without 'plain_knots'"), std::string::npos);
  EXPECT_NE(error_of(with("plain_seconds", "[0.1, 0.2]")).find("3 plain knots but 2 plain times"), std::string::npos);
  EXPECT_NE(error_of(with("plain_seconds", "[0.3, 0.2, 0.4]")).find("plain times must not decrease"),
            std::string::npos);
  EXPECT_NE(error_of(with("plain_knots", "[0.5, 4, 8]")).find("plain knot 0"), std::string::npos);
  EXPECT_NE(error_of(with("sequence_s", "-1")).find("'sequence_s' is -1"), std::string::npos);
  std::string huge = with("propose_s", "12345.5");
  huge.replace(huge.find("12345.5"), 7, "1e400");
  EXPECT_NE(error_of(huge), "(accepted)");
  EXPECT_NE(error_of(with("context_s", "null")).find("'context_s' is null"), std::string::npos);
}

TEST(StepCostProfile, RefusesAnotherModelDeviceOrBuild) {
  const StepCostProfile p = sample();
  auto refused = [&](const std::string& model, const std::string& device, const std::string& build) {
    try {
      check_step_cost_profile_key(p, model, device, build);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_NE(refused("qwen3 hidden 5120", p.device, p.build).find("measured for the model"), std::string::npos);
  EXPECT_NE(refused(p.model, "cpu", p.build).find("measured on the device 'NVIDIA H200'"), std::string::npos);
  EXPECT_NE(refused(p.model, p.device, "other").find("measured by the build"), std::string::npos);
}

}  // namespace
}  // namespace specserve
