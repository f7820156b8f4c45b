// libFuzzer target: a `serve --step-cost-profile` file through parse_step_cost_profile. Malformed input
// must end in specserve::Error; anything else escaping (another exception type, a sanitizer report) is a
// finding. An accepted profile must pass check_step_costs and write back to a profile that parses to the
// same coefficients.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/error.h"
#include "io/step_cost_profile.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const specserve::StepCostProfile p = specserve::parse_step_cost_profile(text);
    specserve::check_step_costs(p.costs);
    const specserve::StepCostProfile q = specserve::parse_step_cost_profile(specserve::write_step_cost_profile(p));
    if (q.costs.row_knots != p.costs.row_knots || q.costs.row_seconds != p.costs.row_seconds || q.model != p.model ||
        q.costs.propose_s != p.costs.propose_s)
      std::abort();
  } catch (const specserve::Error&) {
    // Rejected with a message: the expected outcome for most inputs.
  }
  return 0;
}
