#include "io/model_summary.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/fp8_blocks.h"
#include "io/safetensors.h"

namespace specserve {

namespace {

std::string_view short_name(LayerType t) {
  switch (t) {
    case LayerType::FullAttention: return "full";
    case LayerType::LinearAttention: return "linear";
    case LayerType::SlidingAttention: return "sliding";
  }
  return "?";
}

std::string join(const std::vector<std::string>& parts, std::string_view separator) {
  std::string out;
  for (const auto& p : parts) {
    if (!out.empty()) out += separator;
    out += p;
  }
  return out;
}

// "linear×3, full"
std::string run_length(const std::vector<LayerType>& types, size_t n) {
  std::vector<std::string> runs;
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j < n && types[j] == types[i]) ++j;
    runs.push_back(j - i > 1 ? fmt::format("{}×{}", short_name(types[i]), j - i) : std::string(short_name(types[i])));
    i = j;
  }
  return join(runs, ", ");
}

// 1234567 → "1,234,567 (1.23M)"
std::string human_count(int64_t n) {
  std::string digits = std::to_string(n), grouped;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) grouped += ',';
    grouped += digits[i];
  }
  if (n < 1000) return grouped;
  const char* unit = n >= 1'000'000'000 ? "B" : n >= 1'000'000 ? "M" : "K";
  double scaled = n >= 1'000'000'000 ? n / 1e9 : n >= 1'000'000 ? n / 1e6 : n / 1e3;
  return fmt::format("{} ({:.2f}{})", grouped, scaled, unit);
}

std::string human_bytes(uint64_t n) {
  if (n >= 1'000'000'000) return fmt::format("{:.2f} GB", n / 1e9);
  if (n >= 1'000'000) return fmt::format("{:.1f} MB", n / 1e6);
  if (n >= 1'000) return fmt::format("{:.1f} KB", n / 1e3);
  return fmt::format("{} B", n);
}

std::string weight_layout_name(const ModelSummary& s) {
  if (s.config.family == ModelFamily::DFlashDrafter) return "drafter";
  return s.layout.prefix == "model.language_model." ? "language_model" : "flat";
}

std::string join_ints(const std::vector<int>& v) {
  std::vector<std::string> parts;
  for (int x : v) parts.push_back(std::to_string(x));
  return fmt::format("[{}]", join(parts, ", "));
}

std::map<std::string, int> layer_counts(const ModelConfig& c) {
  std::map<std::string, int> counts;
  for (LayerType t : c.layer_types) ++counts[std::string(layer_type_name(t))];
  return counts;
}

}  // namespace

ModelSummary summarize_model(const std::string& dir) {
  ModelSummary s;
  s.dir = dir;
  s.config = load_model_config(dir);
  // Normal advice: info reads headers only, and read-ahead of a 50 GB checkpoint would be waste.
  auto ckpt = Checkpoint::open(dir, MapAdvice::Normal);
  s.layout = resolve_checkpoint_layout(s.config, *ckpt);
  for (const auto& name : ckpt->names()) {
    const SafetensorsEntry& e = ckpt->entry(name);
    s.parameters_by_dtype[e.dtype] += e.shape.numel();
    s.total_parameters += e.shape.numel();
  }
  for (const auto& t : s.layout.tensors) s.model_parameters += t.shape.numel();
  s.num_files = ckpt->files().size();
  s.num_tensors = ckpt->names().size();
  for (const auto& f : ckpt->files()) s.file_bytes += f->file_size();
  s.fp8_weights = s.layout.fp8_weights.size();
  for (const auto& name : s.layout.fp8_weights) {
    const SafetensorsEntry& scale = ckpt->entry(fp8_scale_name(name));
    s.model_parameters += scale.shape.numel();  // the model reads the block scales too
    s.fp8_bytes += ckpt->entry(name).nbytes() + scale.nbytes();
  }
  return s;
}

std::string layer_schedule(const std::vector<LayerType>& types) {
  const size_t n = types.size();
  size_t period = n;
  for (size_t p = 1; p < n; ++p) {
    if (n % p != 0) continue;
    bool repeats = true;
    for (size_t i = p; i < n && repeats; ++i) repeats = types[i] == types[i % p];
    if (repeats) {
      period = p;
      break;
    }
  }
  const size_t reps = n == 0 ? 0 : n / period;
  if (reps <= 1 || period == 1) return run_length(types, n);  // "full×36", or aperiodic
  return fmt::format("({})×{}", run_length(types, period), reps);
}

std::map<std::string, size_t> group_tensor_names(const std::vector<std::string>& names) {
  std::map<std::string, size_t> groups;
  for (const auto& name : names) {
    size_t dot = name.find('.');
    // "model.visual.blocks.0..." groups as "model.visual"; "mtp.fc.weight" as "mtp".
    if (dot != std::string::npos && name.compare(0, dot, "model") == 0) dot = name.find('.', dot + 1);
    ++groups[name.substr(0, dot)];
  }
  return groups;
}

std::string format_summary_text(const ModelSummary& s) {
  const ModelConfig& c = s.config;
  std::string out;
  auto line = [&out](std::string_view label, const std::string& value) {
    out += fmt::format("{:<14}{}\n", fmt::format("{}:", label), value);
  };
  line("model", s.dir);
  line("architecture",
       fmt::format("{} (model_type {}, family {}, {} config.json)", c.architectures.empty() ? "-" : c.architectures[0],
                   c.model_type, family_name(c.family), c.nested_text_config ? "text_config in" : "flat"));
  std::vector<std::string> counts;
  for (const auto& [type, n] : layer_counts(c)) counts.push_back(fmt::format("{} {}", n, type));
  line("layers", fmt::format("{}: {} ({})", c.num_layers, layer_schedule(c.layer_types), join(counts, ", ")));
  line("sizes", fmt::format("hidden {}, intermediate {}, vocab {}, max positions {}", c.hidden_size,
                            c.intermediate_size, c.vocab_size, c.max_position_embeddings));
  line("attention",
       fmt::format("{} query / {} kv heads × {}, rotary {} dims (theta {:g}, {}){}{}", c.num_heads, c.num_kv_heads,
                   c.head_dim, c.rotary_dim(), c.rope_theta, c.rope_type, c.attn_output_gate ? ", gated output" : "",
                   c.sliding_window ? fmt::format(", sliding window {}", *c.sliding_window) : ""));
  if (c.num_linear_layers() > 0)
    line("deltanet", fmt::format("{} key heads × {}, {} value heads × {}, conv kernel {}", c.linear_num_key_heads,
                                 c.linear_key_head_dim, c.linear_num_value_heads, c.linear_value_head_dim,
                                 c.linear_conv_kernel_dim));
  if (c.family == ModelFamily::DFlashDrafter)
    line("head", "the target's lm_head (drafters have none)");
  else
    line("head", c.tie_word_embeddings ? fmt::format("tied (reads {})", s.layout.head) : "untied (lm_head.weight)");
  line("weights",
       fmt::format("{} layout (prefix '{}'), {} file{}, {} tensors, {}", weight_layout_name(s), s.layout.prefix,
                   s.num_files, s.num_files == 1 ? "" : "s", s.num_tensors, human_bytes(s.file_bytes)));
  std::vector<std::string> params;
  for (const auto& [dtype, n] : s.parameters_by_dtype)
    params.push_back(fmt::format("{} {}", dtype_name(dtype), human_count(n)));
  std::string read_note;
  if (s.model_parameters != s.total_parameters)
    read_note = fmt::format(", of which the model reads {}", human_count(s.model_parameters));
  line("parameters", (params.empty() ? std::string("none") : join(params, "; ")) + read_note);
  if (c.quantization == "fp8")
    line("quantized", fmt::format("fp8 block-128: {} tensors, {} of {} (dequantised to the compute dtype at load)",
                                  s.fp8_weights, human_bytes(s.fp8_bytes), human_bytes(s.file_bytes)));
  if (!s.layout.unused.empty()) {
    std::vector<std::string> groups;
    for (const auto& [group, n] : group_tensor_names(s.layout.unused))
      groups.push_back(fmt::format("{}.* ({})", group, n));
    line("unused", join(groups, ", "));
  }
  if (c.dflash)
    line("drafter",
         fmt::format(
             "block size {}, mask token id {}, target layer ids {}{}", c.dflash->block_size, c.dflash->mask_token_id,
             join_ints(c.dflash->target_layer_ids),
             c.dflash->num_target_layers ? fmt::format(" of {} target layers", c.dflash->num_target_layers) : ""));
  return out;
}

std::string format_summary_json(const ModelSummary& s) {
  const ModelConfig& c = s.config;
  nlohmann::ordered_json j;
  j["model"] = s.dir;
  j["architecture"] = c.architectures.empty() ? "" : c.architectures[0];
  j["model_type"] = c.model_type;
  j["family"] = family_name(c.family);
  j["config_layout"] = c.nested_text_config ? "nested_text_config" : "flat";
  j["num_layers"] = c.num_layers;
  j["layer_schedule"] = layer_schedule(c.layer_types);
  j["layer_counts"] = layer_counts(c);
  auto& types = j["layer_types"] = nlohmann::ordered_json::array();
  for (LayerType t : c.layer_types) types.push_back(layer_type_name(t));
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["vocab_size"] = c.vocab_size;
  j["num_attention_heads"] = c.num_heads;
  j["num_key_value_heads"] = c.num_kv_heads;
  j["head_dim"] = c.head_dim;
  j["rotary_dim"] = c.rotary_dim();
  j["rope_theta"] = c.rope_theta;
  j["rope_type"] = c.rope_type;
  j["attn_output_gate"] = c.attn_output_gate;
  j["sliding_window"] = c.sliding_window ? nlohmann::ordered_json(*c.sliding_window) : nlohmann::ordered_json();
  j["max_position_embeddings"] = c.max_position_embeddings;
  if (c.num_linear_layers() > 0)
    j["linear_attention"] = {{"num_key_heads", c.linear_num_key_heads},
                             {"key_head_dim", c.linear_key_head_dim},
                             {"num_value_heads", c.linear_num_value_heads},
                             {"value_head_dim", c.linear_value_head_dim},
                             {"conv_kernel_dim", c.linear_conv_kernel_dim}};
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["head_tensor"] = s.layout.head;
  j["weight_layout"] = weight_layout_name(s);
  j["weight_prefix"] = s.layout.prefix;
  j["dtype"] = dtype_name(c.dtype);
  j["files"] = s.num_files;
  j["tensors"] = s.num_tensors;
  j["file_bytes"] = s.file_bytes;
  auto& params = j["parameters"] = nlohmann::ordered_json::object();
  for (const auto& [dtype, n] : s.parameters_by_dtype) params[std::string(dtype_name(dtype))] = n;
  j["quantization"] = c.quantization;
  if (c.quantization == "fp8") j["fp8_block128"] = {{"tensors", s.fp8_weights}, {"bytes", s.fp8_bytes}};
  j["total_parameters"] = s.total_parameters;
  j["model_parameters"] = s.model_parameters;
  j["unused_tensors"] = group_tensor_names(s.layout.unused);
  if (c.dflash)
    j["dflash"] = {{"block_size", c.dflash->block_size},
                   {"mask_token_id", c.dflash->mask_token_id},
                   {"target_layer_ids", c.dflash->target_layer_ids},
                   {"num_target_layers", c.dflash->num_target_layers}};
  return j.dump(2) + "\n";
}

}  // namespace specserve
