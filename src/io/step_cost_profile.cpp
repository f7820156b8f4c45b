#include "io/step_cost_profile.h"

#include <cmath>
#include <set>

#include "core/error.h"
#include "io/json_parse.h"

namespace specserve {

namespace {

constexpr size_t kMaxKnots = 64;
constexpr const char* kWhat = "step cost profile";

bool finite_non_negative(double v) { return std::isfinite(v) && v >= 0; }

double number_field(const nlohmann::json& j, const char* key) {
  SS_CHECK(j.contains(key), "{}: '{}' is missing", kWhat, key);
  const nlohmann::json& v = j.at(key);
  SS_CHECK(v.is_number(), "{}: '{}' is {}, not a number", kWhat, key, json_type_name(v));
  return v.get<double>();
}

std::string string_field(const nlohmann::json& j, const char* key) {
  SS_CHECK(j.contains(key), "{}: '{}' is missing", kWhat, key);
  const nlohmann::json& v = j.at(key);
  SS_CHECK(v.is_string(), "{}: '{}' is {}, not a string", kWhat, key, json_type_name(v));
  return v.get<std::string>();
}

std::vector<double> numbers_field(const nlohmann::json& j, const char* key) {
  SS_CHECK(j.contains(key), "{}: '{}' is missing", kWhat, key);
  const nlohmann::json& v = j.at(key);
  SS_CHECK(v.is_array(), "{}: '{}' is {}, not an array", kWhat, key, json_type_name(v));
  SS_CHECK(!v.empty() && v.size() <= kMaxKnots, "{}: '{}' has {} entries (1 to {})", kWhat, key, v.size(), kMaxKnots);
  std::vector<double> out;
  for (size_t i = 0; i < v.size(); ++i) {
    SS_CHECK(v[i].is_number(), "{}: '{}'[{}] is {}, not a number", kWhat, key, i, json_type_name(v[i]));
    out.push_back(v[i].get<double>());
  }
  return out;
}

// A piecewise-linear curve of the form: knots (counts >= 1) increasing, times positive and not decreasing.
void check_curve(const std::vector<double>& knots, const std::vector<double>& seconds, const char* what,
                 const char* counts) {
  SS_CHECK(!knots.empty() && knots.size() <= kMaxKnots, "{}: {} {} knots (1 to {})", kWhat, knots.size(), what,
           kMaxKnots);
  SS_CHECK(seconds.size() == knots.size(), "{}: {} {} knots but {} {} times", kWhat, knots.size(), what, seconds.size(),
           what);
  for (size_t i = 0; i < knots.size(); ++i) {
    SS_CHECK(std::isfinite(knots[i]) && knots[i] >= 1, "{}: {} knot {} is {} (a count of {} >= 1)", kWhat, what, i,
             knots[i], counts);
    SS_CHECK(i == 0 || knots[i] > knots[i - 1], "{}: {} knots must increase ({} after {})", kWhat, what, knots[i],
             knots[i - 1]);
    SS_CHECK(std::isfinite(seconds[i]) && seconds[i] > 0, "{}: {} time {} is {} (seconds > 0)", kWhat, what, i,
             seconds[i]);
    SS_CHECK(i == 0 || seconds[i] >= seconds[i - 1], "{}: {} times must not decrease with {} ({} s at {} after {} s)",
             kWhat, what, counts, seconds[i], knots[i], seconds[i - 1]);
  }
}

}  // namespace

void check_step_costs(const StepCosts& c) {
  check_curve(c.row_knots, c.row_seconds, "row", "rows");
  SS_CHECK(c.plain_knots.empty() == c.plain_seconds.empty(), "{}: {} plain knots but {} plain times", kWhat,
           c.plain_knots.size(), c.plain_seconds.size());
  if (!c.plain_knots.empty()) check_curve(c.plain_knots, c.plain_seconds, "plain", "sequences");
  const std::pair<const char*, double> scalars[] = {{"sequence_s", c.sequence_s},
                                                    {"context_s", c.context_s},
                                                    {"row_context_s", c.row_context_s},
                                                    {"propose_s", c.propose_s},
                                                    {"propose_sequence_s", c.propose_sequence_s},
                                                    {"propose_context_s", c.propose_context_s},
                                                    {"propose_draft_s", c.propose_draft_s}};
  for (const auto& [name, v] : scalars)
    SS_CHECK(finite_non_negative(v), "{}: '{}' is {} (seconds >= 0)", kWhat, name, v);
}

std::string write_step_cost_profile(const StepCostProfile& p) {
  check_step_costs(p.costs);
  const StepCosts& c = p.costs;
  nlohmann::json j = {{"specserve_step_costs", kStepCostProfileVersion},
                      {"model", p.model},
                      {"device", p.device},
                      {"build", p.build},
                      {"row_knots", c.row_knots},
                      {"row_seconds", c.row_seconds},
                      {"sequence_s", c.sequence_s},
                      {"context_s", c.context_s},
                      {"row_context_s", c.row_context_s},
                      {"propose_s", c.propose_s},
                      {"propose_sequence_s", c.propose_sequence_s},
                      {"propose_context_s", c.propose_context_s},
                      {"propose_draft_s", c.propose_draft_s}};
  if (!c.plain_knots.empty()) {
    j["plain_knots"] = c.plain_knots;
    j["plain_seconds"] = c.plain_seconds;
  }
  return j.dump(2) + "\n";
}

StepCostProfile parse_step_cost_profile(std::string_view text) {
  const nlohmann::json j = parse_json(text, kWhat);
  SS_CHECK(j.is_object(), "{}: the file holds {}, not an object", kWhat, json_type_name(j));
  static const std::set<std::string> kKeys = {
      "specserve_step_costs", "model",       "device",        "build",     "row_knots",          "row_seconds",
      "sequence_s",           "context_s",   "row_context_s", "propose_s", "propose_sequence_s", "propose_context_s",
      "propose_draft_s",      "plain_knots", "plain_seconds"};
  for (const auto& [key, value] : j.items()) SS_CHECK(kKeys.count(key) > 0, "{}: unknown key '{}'", kWhat, key);
  SS_CHECK(j.contains("specserve_step_costs"), "{}: 'specserve_step_costs' (the format version) is missing", kWhat);
  const nlohmann::json& version = j.at("specserve_step_costs");
  SS_CHECK(version.is_number_integer() && version.get<int64_t>() == kStepCostProfileVersion,
           "{}: format version {} (this build reads version {})", kWhat, version.dump(), kStepCostProfileVersion);
  StepCostProfile p;
  p.model = string_field(j, "model");
  p.device = string_field(j, "device");
  p.build = string_field(j, "build");
  StepCosts& c = p.costs;
  c.row_knots = numbers_field(j, "row_knots");
  c.row_seconds = numbers_field(j, "row_seconds");
  SS_CHECK(j.contains("plain_knots") == j.contains("plain_seconds"), "{}: '{}' without '{}'", kWhat,
           j.contains("plain_knots") ? "plain_knots" : "plain_seconds",
           j.contains("plain_knots") ? "plain_seconds" : "plain_knots");
  if (j.contains("plain_knots")) {
    c.plain_knots = numbers_field(j, "plain_knots");
    c.plain_seconds = numbers_field(j, "plain_seconds");
  }
  c.sequence_s = number_field(j, "sequence_s");
  c.context_s = number_field(j, "context_s");
  c.row_context_s = number_field(j, "row_context_s");
  c.propose_s = number_field(j, "propose_s");
  c.propose_sequence_s = number_field(j, "propose_sequence_s");
  c.propose_context_s = number_field(j, "propose_context_s");
  c.propose_draft_s = number_field(j, "propose_draft_s");
  check_step_costs(c);
  return p;
}

void check_step_cost_profile_key(const StepCostProfile& p, std::string_view model, std::string_view device,
                                 std::string_view build) {
  SS_CHECK(p.model == model, "{}: measured for the model '{}', not this one ('{}')", kWhat, p.model, model);
  SS_CHECK(p.device == device, "{}: measured on the device '{}', not this one ('{}')", kWhat, p.device, device);
  SS_CHECK(p.build == build, "{}: measured by the build '{}', not this one ('{}')", kWhat, p.build, build);
}

}  // namespace specserve
