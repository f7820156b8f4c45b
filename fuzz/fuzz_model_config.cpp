// libFuzzer target: a config.json text through parse_model_config (architecture detection, dimensions,
// RoPE, layer schedule, DeltaNet and DFlash keys, quantization_config). Malformed input must end in
// specserve::Error; anything else escaping (another exception type, a sanitizer report) is a finding. An
// accepted config must be consistent: one layer type per layer, dimensions in range, and the fp8 block-128
// flag set exactly when quant_method is fp8 with nothing unimplemented.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/error.h"
#include "io/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const specserve::ModelConfig c = specserve::parse_model_config(text);
    if (c.layer_types.size() != static_cast<size_t>(c.num_layers)) std::abort();
    if (c.num_layers <= 0 || c.hidden_size <= 0 || c.vocab_size <= 0 || c.head_dim <= 0) std::abort();
    if (c.num_kv_heads <= 0 || c.num_heads % c.num_kv_heads != 0) std::abort();
    if (c.fp8_block128 != (c.quantization == "fp8" && c.quantization_unimplemented.empty())) std::abort();
    if (!c.quantization_unimplemented.empty() && c.quantization != "fp8") std::abort();
    if (c.quantization_unimplemented.find('\n') != std::string::npos) std::abort();  // one-line refusals
  } catch (const specserve::Error&) {
    // Rejected with a message: the expected outcome for most inputs.
  }
  return 0;
}
