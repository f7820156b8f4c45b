// libFuzzer target: a --draft-vocab id list file through parse_id_list. Malformed input must end in
// specserve::Error; anything else escaping (another exception type, a sanitizer report) is a finding.
// An accepted list holds only ids in [0, 2^31 - 1], and printing it back one id per line must parse
// to the same list.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/error.h"
#include "io/id_list.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const std::vector<int32_t> ids = specserve::parse_id_list(text);
    std::string again;
    for (int32_t id : ids) {
      if (id < 0) std::abort();
      again += std::to_string(id) + "\n";
    }
    if (specserve::parse_id_list(again) != ids) std::abort();
  } catch (const specserve::Error&) {
    // Rejected with a message: the expected outcome for most inputs.
  }
  return 0;
}
