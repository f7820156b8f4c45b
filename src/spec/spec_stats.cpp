#include "spec/spec_stats.h"

namespace specserve::spec {

SpecStats spec_stats(std::span<const engine::SpecStep> steps) {
  SpecStats s;
  std::vector<int64_t> proposed, accepted;
  int64_t committed = 0;
  for (const auto& st : steps) {
    ++s.steps;
    s.accepted_total += st.accepted;
    committed += st.accepted + 1;
    if (proposed.size() < st.drafts.size()) {
      proposed.resize(st.drafts.size(), 0);
      accepted.resize(st.drafts.size(), 0);
    }
    for (size_t i = 0; i < st.drafts.size(); ++i) {
      ++proposed[i];
      if (static_cast<int>(i) < st.accepted) ++accepted[i];
    }
  }
  if (s.steps > 0) s.tau = static_cast<double>(committed) / static_cast<double>(s.steps);
  for (size_t i = 0; i < proposed.size(); ++i)
    s.accept_rate_per_position.push_back(static_cast<double>(accepted[i]) / static_cast<double>(proposed[i]));
  return s;
}

}  // namespace specserve::spec
