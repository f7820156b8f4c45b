// libFuzzer target: a whole safetensors file image (8-byte length prefix, JSON header, data) through
// the framing check and the header parser. Malformed input must end in specserve::Error; anything
// else escaping (another exception type, a sanitizer report) is a finding. An accepted header must
// also satisfy the invariants the zero-copy reader relies on.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/error.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    specserve::SafetensorsFraming framing = specserve::read_safetensors_framing(bytes, size);
    specserve::SafetensorsHeader header =
        specserve::parse_safetensors_header(bytes.substr(8, framing.header_size), framing.data_size);
    uint64_t covered = 0;
    for (const auto& e : header.entries) {
      const uint64_t expected = static_cast<uint64_t>(e.shape.numel()) * specserve::dtype_size(e.dtype);
      if (e.begin != covered || e.end < e.begin || e.end > framing.data_size || e.end - e.begin != expected)
        std::abort();  // the parser accepted an entry a view could read out of bounds with
      covered = e.end;
    }
    if (covered != framing.data_size) std::abort();
  } catch (const specserve::Error&) {
    // Rejected with a message: the expected outcome for most inputs.
  }
  return 0;
}
