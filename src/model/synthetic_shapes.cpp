#include "model/synthetic_shapes.h"

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace specserve {

namespace {

using nlohmann::json;

struct Dense {
  int hidden, layers, heads, kv_heads, head_dim, intermediate;
  int64_t vocab;
  double theta;
};

json qwen3_target(const Dense& d) {
  return {{"architectures", {"Qwen3ForCausalLM"}},
          {"model_type", "qwen3"},
          {"hidden_size", d.hidden},
          {"num_hidden_layers", d.layers},
          {"num_attention_heads", d.heads},
          {"num_key_value_heads", d.kv_heads},
          {"head_dim", d.head_dim},
          {"intermediate_size", d.intermediate},
          {"vocab_size", d.vocab},
          {"rms_norm_eps", 1e-6},
          {"rope_theta", d.theta},
          {"max_position_embeddings", 40960},
          {"tie_word_embeddings", false},
          {"eos_token_id", 151645}};
}

struct Hybrid {
  int hidden, groups;  // `groups` × (3 DeltaNet layers + 1 attention layer)
  int heads, kv_heads, head_dim, intermediate;
  int lin_k_heads, lin_v_heads, lin_dim;
  int64_t vocab;
};

json qwen3_5_target(const Hybrid& h) {
  json types = json::array();
  for (int g = 0; g < h.groups; ++g)
    for (const char* t : {"linear_attention", "linear_attention", "linear_attention", "full_attention"})
      types.push_back(t);
  return {{"architectures", {"Qwen3_5ForCausalLM"}},
          {"model_type", "qwen3_5_text"},
          {"hidden_size", h.hidden},
          {"num_hidden_layers", 4 * h.groups},
          {"layer_types", types},
          {"num_attention_heads", h.heads},
          {"num_key_value_heads", h.kv_heads},
          {"head_dim", h.head_dim},
          {"intermediate_size", h.intermediate},
          {"linear_conv_kernel_dim", 4},
          {"linear_key_head_dim", h.lin_dim},
          {"linear_value_head_dim", h.lin_dim},
          {"linear_num_key_heads", h.lin_k_heads},
          {"linear_num_value_heads", h.lin_v_heads},
          {"vocab_size", h.vocab},
          {"rms_norm_eps", 1e-6},
          {"partial_rotary_factor", 0.25},
          {"max_position_embeddings", 262144},
          {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", 1e7}, {"partial_rotary_factor", 0.25}}},
          {"tie_word_embeddings", false},
          {"eos_token_id", 248044}};
}

struct Drafter {
  int hidden, layers, heads, kv_heads, head_dim, intermediate;
  std::vector<int> taps;
  int num_target_layers;
  int64_t vocab, mask_token;
  double theta;
  int sliding_layers = 0;  // the first ones; the rest full (docs/DFLASH.md §1.7)
};

json drafter(const Drafter& d) {
  json types = json::array();
  for (int i = 0; i < d.layers; ++i) types.push_back(i < d.sliding_layers ? "sliding_attention" : "full_attention");
  json j = {{"architectures", {"DFlashDraftModel"}},
            {"model_type", "qwen3"},
            {"hidden_size", d.hidden},
            {"num_hidden_layers", d.layers},
            {"num_attention_heads", d.heads},
            {"num_key_value_heads", d.kv_heads},
            {"head_dim", d.head_dim},
            {"intermediate_size", d.intermediate},
            {"vocab_size", d.vocab},
            {"rms_norm_eps", 1e-6},
            {"rope_theta", d.theta},
            {"max_position_embeddings", 262144},
            {"block_size", 16},
            {"num_target_layers", d.num_target_layers},
            {"layer_types", types},
            {"dflash_config", {{"mask_token_id", d.mask_token}, {"target_layer_ids", d.taps}}},
            {"tie_word_embeddings", false}};
  if (d.sliding_layers > 0) {
    j["sliding_window"] = 2048;
    j["use_sliding_window"] = true;
  }
  return j;
}

SyntheticShape make(const std::string& name, const json& target, const json& draft) {
  return {name, parse_model_config(target.dump()), parse_model_config(draft.dump())};
}

// The quantization_config of Qwen's fp8 releases (docs/MODELS.md §6): the target's Linear weights are then
// made block-scaled fp8 and kept so (TargetModel::synthetic); the drafter stays bf16, as z-lab ships it.
json fp8(json target) {
  target["quantization_config"] = {
      {"quant_method", "fp8"}, {"fmt", "e4m3"}, {"activation_scheme", "dynamic"}, {"weight_block_size", {128, 128}}};
  return target;
}

constexpr std::string_view kFp8Suffix = "-fp8";

}  // namespace

std::vector<std::string> synthetic_shape_names() {
  return {"qwen3-8b",     "qwen3.6-27b",     "qwen3.5-27b",     "tiny",
          "qwen3-8b-fp8", "qwen3.6-27b-fp8", "qwen3.5-27b-fp8", "tiny-fp8"};
}

SyntheticShape synthetic_shape(std::string_view name) {
  std::string_view base = name;
  const bool quantised = name.size() > kFp8Suffix.size() && name.ends_with(kFp8Suffix);
  if (quantised) base.remove_suffix(kFp8Suffix.size());
  auto target = [&](json t) { return quantised ? fp8(std::move(t)) : t; };
  if (base == "qwen3-8b")
    return make(std::string(name), target(qwen3_target({4096, 36, 32, 8, 128, 12288, 151936, 1e6})),
                drafter({4096, 5, 32, 8, 128, 12288, {1, 9, 17, 25, 33}, 36, 151936, 151669, 1e6}));
  if (base == "qwen3.6-27b" || base == "qwen3.5-27b")
    return make(std::string(name), target(qwen3_5_target({5120, 16, 24, 4, 256, 17408, 16, 48, 128, 248320})),
                drafter({5120, 5, 32, 8, 128, 17408, {1, 16, 31, 46, 61}, 64, 248320, 248070, 1e7, 4}));
  if (base == "tiny")
    return make(std::string(name), target(qwen3_5_target({256, 2, 4, 2, 64, 512, 2, 4, 32, 1024})),
                drafter({256, 2, 4, 2, 64, 512, {1, 5}, 8, 1024, 1000, 1e7, 1}));
  fail("unknown synthetic shape '{}' (known: {})", name, fmt::join(synthetic_shape_names(), ", "));
}

std::optional<SyntheticShape> synthetic_shape_for(const ModelConfig& t) {
  for (const char* name : {"qwen3-8b", "qwen3.6-27b", "tiny"}) {
    SyntheticShape shape = synthetic_shape(name);
    const ModelConfig& s = shape.target;
    if (s.hidden_size == t.hidden_size && s.intermediate_size == t.intermediate_size && s.num_layers == t.num_layers &&
        s.layer_types == t.layer_types && s.num_heads == t.num_heads && s.num_kv_heads == t.num_kv_heads &&
        s.head_dim == t.head_dim && s.vocab_size == t.vocab_size && s.linear_num_key_heads == t.linear_num_key_heads &&
        s.linear_num_value_heads == t.linear_num_value_heads && s.linear_key_head_dim == t.linear_key_head_dim &&
        s.linear_value_head_dim == t.linear_value_head_dim)
      return shape;
  }
  return std::nullopt;
}

}  // namespace specserve
