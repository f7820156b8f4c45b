#include "spec/spec_json.h"

#include "spec/spec_stats.h"

namespace specserve::spec {

void add_spec_json(std::span<const engine::SpecStep> steps, bool trace, nlohmann::ordered_json& root) {
  const SpecStats s = spec_stats(steps);
  nlohmann::ordered_json& stats = root["stats"];
  stats["steps"] = s.steps;
  stats["accepted_total"] = s.accepted_total;
  stats["tau"] = s.tau;
  stats["accept_rate_per_position"] = s.accept_rate_per_position;
  if (!trace) return;
  nlohmann::ordered_json records = nlohmann::ordered_json::array();
  for (const auto& st : steps)
    records.push_back(
        {{"pos", st.position}, {"drafts", st.drafts}, {"accepted", st.accepted}, {"emitted", st.emitted}});
  root["steps"] = std::move(records);
}

}  // namespace specserve::spec
