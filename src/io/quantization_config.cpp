// The quantisation a config.json declares. Qwen's block-128 FP8 format (docs/MODELS.md §6) is the one
// scheme the loader implements; every other scheme, and an fp8 config with any key at a value other than
// that format's, is recorded so that the loader refuses it naming the method or the key.
#include <algorithm>
#include <cctype>

#include "core/error.h"
#include "io/fp8_blocks.h"
#include "io/model_config_parts.h"
#include "io/printable.h"

namespace specserve {

namespace {

std::string lowercase(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return s;
}

std::string value_text(const std::optional<std::vector<int64_t>>& v) {
  if (!v) return "null";
  std::string out;
  for (int64_t x : *v) out += (out.empty() ? "" : ", ") + std::to_string(x);
  return "[" + out + "]";
}

// "" when quantization_config `q` (quant_method fp8) is the block-128 format, else the first key whose
// value is not, with that value. Ill-typed values of known keys are errors naming the key.
std::string fp8_unimplemented_key(const JsonKeys& q) {
  for (const std::string& key : q.keys()) {
    const std::string path = q.key_path(key);
    if (key == "quant_method") continue;
    if (key == "fmt") {
      // DeepSeek-style configs (Qwen's FP8 releases) name the element format; transformers omits it.
      const auto fmt = q.opt_string(key);
      if (fmt && lowercase(*fmt) != "e4m3") return fmt::format("{} {}", path, quoted_name(*fmt));
    } else if (key == "activation_scheme") {
      // "static" checkpoints carry per-tensor activation scales the model would have to apply.
      const auto scheme = q.opt_string(key);
      if (scheme && lowercase(*scheme) != "dynamic") return fmt::format("{} {}", path, quoted_name(*scheme));
    } else if (key == "weight_block_size") {
      // null means one scale per tensor, a different layout of weight_scale_inv.
      const auto block = q.opt_int_list(key);
      if (!block || *block != std::vector<int64_t>{kFp8BlockSize, kFp8BlockSize})
        return fmt::format("{} {}", path, value_text(block));
    } else if (key == "scale_fmt") {
      // "ue8m0" scales are powers of two kept in the scale tensor's dtype: still the multiplier.
      const auto scale_fmt = q.opt_string(key);
      if (scale_fmt && *scale_fmt != "float" && *scale_fmt != "ue8m0")
        return fmt::format("{} {}", path, quoted_name(*scale_fmt));
    } else if (key == "modules_to_not_convert" || key == "ignored_layers" || key == "modules_to_convert") {
      // Which modules stayed unquantised, or were quantised (transformers 5 writes modules_to_convert,
      // null for "every Linear not excluded"): the loader reads each tensor's dtype instead.
      q.opt_string_list(key);
    } else if (key == "dequantize") {
      q.boolean(key, false);  // a transformers loading option, not a property of the stored weights
    } else {
      return fmt::format("key {}", quoted_name(path));
    }
  }
  if (!q.has("weight_block_size"))
    return fmt::format("{} absent (vLLM reads that as one scale per tensor, transformers as 128×128 blocks)",
                       q.key_path("weight_block_size"));
  return "";
}

}  // namespace

void parse_quantization(const JsonKeys& root, const JsonKeys& text, ModelConfig& c) {
  for (const JsonKeys* keys : {&root, &text}) {
    const auto q = keys->opt_object("quantization_config");
    if (!q) continue;
    // A declared scheme without a readable quant_method is still a quantised checkpoint: it reads as
    // "unknown" so that the loader refuses it.
    c.quantization = q->opt_string("quant_method").value_or("unknown");
    if (c.quantization == "fp8") {
      c.quantization_unimplemented = fp8_unimplemented_key(*q);
      c.fp8_block128 = c.quantization_unimplemented.empty();
    }
    return;
  }
  if (root.has("compression_config")) c.quantization = "compressed-tensors";
}

}  // namespace specserve
