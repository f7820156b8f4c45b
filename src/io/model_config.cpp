// config.json → ModelConfig: family detection, then the text-model keys shared by every family,
// then the family-specific parts (Gated DeltaNet keys, layer schedule, DFlash block).
#include "io/model_config.h"

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "io/json_keys.h"
#include "io/json_parse.h"
#include "io/model_config_parts.h"

namespace specserve {

namespace {

enum class ConfigLayout { Flat, NestedText };

struct SupportedArchitecture {
  std::string_view architecture;
  std::string_view model_type;  // the top-level model_type that goes with it
  ModelFamily family;
  ConfigLayout layout;
};

constexpr std::array<SupportedArchitecture, 4> kSupported = {{
    {"Qwen3ForCausalLM", "qwen3", ModelFamily::Qwen3, ConfigLayout::Flat},
    {"Qwen3_5ForConditionalGeneration", "qwen3_5", ModelFamily::Qwen3_5, ConfigLayout::NestedText},
    {"Qwen3_5ForCausalLM", "qwen3_5_text", ModelFamily::Qwen3_5, ConfigLayout::Flat},
    // z-lab drafters load as a Qwen3Config (docs/DFLASH.md §2.1).
    {"DFlashDraftModel", "qwen3", ModelFamily::DFlashDrafter, ConfigLayout::Flat},
}};

std::string supported_list() {
  std::string s;
  for (const auto& a : kSupported) s += (s.empty() ? "" : ", ") + std::string(a.architecture);
  return s;
}

// By "architectures" when present (what transformers instantiates), else by "model_type".
const SupportedArchitecture& detect_architecture(const JsonKeys& root, ModelConfig& c) {
  c.architectures = root.opt_string_list("architectures").value_or(std::vector<std::string>{});
  const std::string model_type = root.opt_string("model_type").value_or("");
  if (!c.architectures.empty()) {
    for (const auto& a : kSupported) {
      if (c.architectures[0] != a.architecture) continue;
      if (!model_type.empty() && model_type != a.model_type)
        fail("architecture '{}' expects model_type '{}', found '{}' (key 'model_type')", a.architecture, a.model_type,
             model_type);
      return a;
    }
    fail("unsupported architecture '{}' (key 'architectures'); supported: {}", c.architectures[0], supported_list());
  }
  if (model_type.empty()) fail("missing key 'architectures' (and no 'model_type' either)");
  // Without "architectures", a qwen3 config with a dflash_config block is a drafter.
  const bool drafter = root.has("dflash_config");
  for (const auto& a : kSupported)
    if (a.model_type == model_type && (a.family == ModelFamily::DFlashDrafter) == drafter) return a;
  fail("unsupported model_type '{}' (key 'model_type'); supported architectures: {}", model_type, supported_list());
}

DType parse_torch_dtype(const JsonKeys& keys, std::string_view key) {
  std::string name = keys.string(key);
  if (name.rfind("torch.", 0) == 0) name.erase(0, 6);  // older files wrote "torch.bfloat16"
  if (name == "bfloat16") return DType::BF16;
  if (name == "float16" || name == "half") return DType::F16;
  if (name == "float32" || name == "float") return DType::F32;
  fail("key '{}' has unsupported value '{}' (expected bfloat16, float16 or float32)", keys.key_path(key), name);
}

// A shape-defining key. The bound (16M, far above any real model) keeps every product of up to
// three of them, as tensor shapes need, inside int64.
int dimension(const JsonKeys& t, std::string_view key) {
  constexpr int kMaxDimension = 1 << 24;
  const int v = t.positive_int(key);
  if (v > kMaxDimension)
    fail("key '{}' ({}) is larger than {}, which no supported model has", t.key_path(key), v, kMaxDimension);
  return v;
}

void parse_dimensions(const JsonKeys& t, ModelConfig& c) {
  c.vocab_size = dimension(t, "vocab_size");
  c.hidden_size = dimension(t, "hidden_size");
  c.intermediate_size = dimension(t, "intermediate_size");
  c.num_layers = dimension(t, "num_hidden_layers");
  c.num_heads = dimension(t, "num_attention_heads");
  c.num_kv_heads = dimension(t, "num_key_value_heads");
  c.head_dim = dimension(t, "head_dim");
  if (c.num_heads % c.num_kv_heads != 0)
    fail("key '{}' ({}) must be a multiple of key '{}' ({})", t.key_path("num_attention_heads"), c.num_heads,
         t.key_path("num_key_value_heads"), c.num_kv_heads);
  c.rms_norm_eps = t.opt_number("rms_norm_eps").value_or(1e-6);
  if (!(c.rms_norm_eps > 0)) fail("key '{}' must be positive", t.key_path("rms_norm_eps"));
  // transformers' default for both Qwen3Config and Qwen3_5TextConfig.
  c.max_position_embeddings = t.opt_positive_int("max_position_embeddings").value_or(32768);
  c.attention_bias = t.boolean("attention_bias", false);
  if (auto act = t.opt_string("hidden_act"); act && *act != "silu")
    fail("key '{}' is '{}'; only silu is supported", t.key_path("hidden_act"), *act);
  if (auto experts = t.opt_integer("num_experts"); experts && *experts > 0)
    fail("key '{}' is {}: mixture-of-experts models are not supported", t.key_path("num_experts"), *experts);
}

// θ and the rotary fraction live in rope_parameters (transformers v5) or at the top level (older
// files); rope_scaling is the older home of the RoPE type.
void parse_rope(const JsonKeys& t, ModelConfig& c, double default_partial_rotary_factor) {
  auto params = t.opt_object("rope_parameters");
  if (params && params->has("rope_theta")) {
    c.rope_theta = params->number("rope_theta");
  } else if (t.has("rope_theta")) {
    c.rope_theta = t.number("rope_theta");
  } else {
    fail("missing key '{}' (or '{}')", t.key_path("rope_theta"), t.key_path("rope_parameters.rope_theta"));
  }
  if (!(c.rope_theta > 0)) fail("key 'rope_theta' must be positive, found {}", c.rope_theta);

  const JsonKeys* factor_from = params && params->has("partial_rotary_factor") ? &*params : &t;
  c.partial_rotary_factor = factor_from->opt_number("partial_rotary_factor").value_or(default_partial_rotary_factor);
  if (!(c.partial_rotary_factor > 0 && c.partial_rotary_factor <= 1))
    fail("key '{}' must be in (0, 1], found {}", factor_from->key_path("partial_rotary_factor"),
         c.partial_rotary_factor);
  if (c.rotary_dim() < 2 || c.rotary_dim() % 2 != 0)
    fail("head_dim {} × partial_rotary_factor {} gives {} rotated dims; RoPE needs an even number ≥ 2", c.head_dim,
         c.partial_rotary_factor, c.rotary_dim());

  std::optional<std::string> type;
  if (params) type = params->opt_string("rope_type");
  if (!type) {
    if (auto scaling = t.opt_object("rope_scaling")) {
      type = scaling->opt_string("rope_type");
      if (!type) type = scaling->opt_string("type");
    }
  }
  c.rope_type = type.value_or("default");
  if (c.rope_type == "mrope") c.rope_type = "default";  // M-RoPE is plain RoPE for text positions
}

std::optional<LayerType> layer_type_from_name(std::string_view name) {
  if (name == "full_attention") return LayerType::FullAttention;
  if (name == "linear_attention") return LayerType::LinearAttention;
  if (name == "sliding_attention") return LayerType::SlidingAttention;
  return std::nullopt;
}

// Reads an explicit "layer_types" list, checking its length and that each entry is one this family
// has. Returns false when the key is absent.
bool parse_layer_type_list(const JsonKeys& t, ModelConfig& c, std::initializer_list<LayerType> allowed) {
  auto names = t.opt_string_list("layer_types");
  if (!names) return false;
  if (names->size() != static_cast<size_t>(c.num_layers))
    fail("key '{}' has {} entries but '{}' is {}", t.key_path("layer_types"), names->size(),
         t.key_path("num_hidden_layers"), c.num_layers);
  for (size_t i = 0; i < names->size(); ++i) {
    auto type = layer_type_from_name((*names)[i]);
    if (!type || std::find(allowed.begin(), allowed.end(), *type) == allowed.end())
      fail("key '{}[{}]' is '{}', which {} models do not have", t.key_path("layer_types"), i, (*names)[i],
           family_name(c.family));
    c.layer_types.push_back(*type);
  }
  return true;
}

// Qwen3 and drafters: full attention, or sliding-window attention on layers ≥ max_window_layers
// when use_sliding_window is set (transformers' Qwen3Config rule), unless layer_types says otherwise.
void parse_qwen3_schedule(const JsonKeys& t, ModelConfig& c) {
  const bool explicit_list = parse_layer_type_list(t, c, {LayerType::FullAttention, LayerType::SlidingAttention});
  const bool listed_sliding =
      std::find(c.layer_types.begin(), c.layer_types.end(), LayerType::SlidingAttention) != c.layer_types.end();
  const bool use_sliding = t.boolean("use_sliding_window", listed_sliding);
  const auto window = t.opt_positive_int("sliding_window");
  if (use_sliding && window) c.sliding_window = *window;
  if (!explicit_list) {
    const int max_window_layers = t.opt_positive_int("max_window_layers").value_or(28);
    for (int i = 0; i < c.num_layers; ++i)
      c.layer_types.push_back(c.sliding_window && i >= max_window_layers ? LayerType::SlidingAttention
                                                                         : LayerType::FullAttention);
  }
  if (listed_sliding && !use_sliding)
    fail("key '{}' lists sliding_attention layers but '{}' is false", t.key_path("layer_types"),
         t.key_path("use_sliding_window"));
  if (listed_sliding && !c.sliding_window)
    fail("key '{}' lists sliding_attention layers but '{}' is missing", t.key_path("layer_types"),
         t.key_path("sliding_window"));
}

// Qwen3.5: an explicit list, else layer i is full attention iff (i+1) % full_attention_interval == 0.
void parse_hybrid_schedule(const JsonKeys& t, ModelConfig& c) {
  if (parse_layer_type_list(t, c, {LayerType::FullAttention, LayerType::LinearAttention})) return;
  const int interval = t.opt_positive_int("full_attention_interval").value_or(4);
  for (int i = 0; i < c.num_layers; ++i)
    c.layer_types.push_back((i + 1) % interval == 0 ? LayerType::FullAttention : LayerType::LinearAttention);
}

void parse_gated_deltanet(const JsonKeys& t, ModelConfig& c) {
  if (c.num_linear_layers() == 0) return;
  c.linear_conv_kernel_dim = dimension(t, "linear_conv_kernel_dim");
  c.linear_key_head_dim = dimension(t, "linear_key_head_dim");
  c.linear_value_head_dim = dimension(t, "linear_value_head_dim");
  c.linear_num_key_heads = dimension(t, "linear_num_key_heads");
  c.linear_num_value_heads = dimension(t, "linear_num_value_heads");
  if (c.linear_num_value_heads % c.linear_num_key_heads != 0)
    fail("key '{}' ({}) must be a multiple of key '{}' ({})", t.key_path("linear_num_value_heads"),
         c.linear_num_value_heads, t.key_path("linear_num_key_heads"), c.linear_num_key_heads);
}

// Keys a composite (text_config) file may keep at either level: the text config wins for token ids
// (transformers reads them there), the top level wins for tying and dtype (where Qwen3.5 puts them).
const JsonKeys& pick(const JsonKeys& first, const JsonKeys& second, std::string_view key) {
  return first.has(key) || !second.has(key) ? first : second;
}

}  // namespace

std::string_view family_name(ModelFamily f) {
  switch (f) {
    case ModelFamily::Qwen3: return "qwen3";
    case ModelFamily::Qwen3_5: return "qwen3_5";
    case ModelFamily::DFlashDrafter: return "dflash";
  }
  return "?";
}

std::string_view layer_type_name(LayerType t) {
  switch (t) {
    case LayerType::FullAttention: return "full_attention";
    case LayerType::LinearAttention: return "linear_attention";
    case LayerType::SlidingAttention: return "sliding_attention";
  }
  return "?";
}

int ModelConfig::num_attention_layers() const { return num_layers - num_linear_layers(); }

int ModelConfig::num_linear_layers() const {
  return static_cast<int>(std::count(layer_types.begin(), layer_types.end(), LayerType::LinearAttention));
}

ModelConfig parse_model_config(std::string_view json_text) {
  const nlohmann::json doc = parse_json(json_text, "config.json");
  if (!doc.is_object()) fail("config.json is {}, expected an object", json_type_name(doc));
  const JsonKeys root(doc, "");
  ModelConfig c;
  const SupportedArchitecture& arch = detect_architecture(root, c);
  c.family = arch.family;
  c.nested_text_config = arch.layout == ConfigLayout::NestedText;
  const JsonKeys text = c.nested_text_config ? root.object("text_config") : root;
  c.model_type = text.opt_string("model_type").value_or(std::string(arch.model_type));

  parse_dimensions(text, c);
  if (c.family == ModelFamily::Qwen3_5) {
    parse_rope(text, c, /*default_partial_rotary_factor=*/0.25);
    parse_hybrid_schedule(text, c);
    parse_gated_deltanet(text, c);
    c.attn_output_gate = text.boolean("attn_output_gate", true);
  } else {
    parse_rope(text, c, 1.0);
    parse_qwen3_schedule(text, c);
  }
  c.tie_word_embeddings = pick(root, text, "tie_word_embeddings").boolean("tie_word_embeddings", false);
  c.bos_token_id = pick(text, root, "bos_token_id").opt_integer("bos_token_id");
  c.eos_token_ids = pick(text, root, "eos_token_id").int_or_int_list("eos_token_id");
  // "dtype" is the transformers v5 spelling of "torch_dtype". Every released checkpoint of these
  // families is bf16, hence the default.
  const std::string_view dtype_key = pick(root, text, "dtype").has("dtype") ? "dtype" : "torch_dtype";
  const JsonKeys& dtype_from = pick(root, text, dtype_key);
  c.dtype = dtype_from.has(dtype_key) ? parse_torch_dtype(dtype_from, dtype_key) : DType::BF16;

  parse_quantization(root, text, c);

  if (c.family == ModelFamily::DFlashDrafter) c.dflash = parse_dflash_config(root, c);
  return c;
}

ModelConfig load_model_config(const std::string& dir) {
  const std::filesystem::path path = std::filesystem::path(dir) / "config.json";
  return with_context(path.string(), [&] {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("cannot read (is '{}' a model directory?)", dir);
    std::ostringstream text;
    text << in.rdbuf();
    ModelConfig c = parse_model_config(text.str());
    // AutoGPTQ / AutoAWQ exports describe their packing in a file of its own.
    if (c.quantization.empty() && std::filesystem::exists(std::filesystem::path(dir) / "quantize_config.json"))
      c.quantization = "gptq/awq (quantize_config.json)";
    return c;
  });
}

}  // namespace specserve
