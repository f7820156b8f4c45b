// libFuzzer target: an environment variable's text through parse_env_int (core/env_registry.h), the
// parse every integer variable gets. Malformed text must end in specserve::Error; anything else escaping
// is a finding. An accepted value prints back to the same text unless that had a redundant form
// (leading zeros, "-0"), and the printed form parses to the same value.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/env_registry.h"
#include "core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const int64_t v = specserve::parse_env_int("FUZZ_VARIABLE", text);
    if (specserve::parse_env_int("FUZZ_VARIABLE", std::to_string(v)) != v) std::abort();
    if (text.empty()) std::abort();  // nothing is not a number
  } catch (const specserve::Error&) {
    // Rejected with a message.
  }
  return 0;
}
