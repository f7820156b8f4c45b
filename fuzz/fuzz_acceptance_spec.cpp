// libFuzzer target: a `bench controlled --acceptance` string through parse_acceptance_spec. Malformed
// input must end in specserve::Error; anything else escaping (another exception type, a sanitizer
// report) is a finding. An accepted spec must give probabilities in [0, 1] for any γ it allows, and
// its label must parse back to the same spec.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/error.h"
#include "io/acceptance_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const specserve::AcceptanceSpec spec = specserve::parse_acceptance_spec(text);
    for (int gamma : {1, 15}) {
      try {
        for (double p : spec.conditional(gamma))
          if (!(p >= 0 && p <= 1)) std::abort();
      } catch (const specserve::Error&) {
        // A geometric τ above γ + 1: refused with a message.
      }
    }
    if (spec.kind == specserve::AcceptanceSpec::Kind::Profile) {
      std::string again = "profile:";
      for (size_t i = 0; i < spec.profile.size(); ++i) again += (i ? "," : "") + std::to_string(spec.profile[i]);
      if (specserve::parse_acceptance_spec(again).profile.size() != spec.profile.size()) std::abort();
    }
  } catch (const specserve::Error&) {
    // Rejected with a message: the expected outcome for most inputs.
  }
  return 0;
}
