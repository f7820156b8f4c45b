#include "io/checkpoint_layout.h"

#include <array>
#include <set>

#include "core/error.h"
#include "io/fp8_blocks.h"
#include "io/printable.h"

namespace specserve {

namespace {

class TensorList {
 public:
  explicit TensorList(const ModelConfig& c) : c_(c) {}
  std::vector<ExpectedTensor> take() { return std::move(out_); }

  void add(std::string name, Shape shape, std::string reason = "") {
    out_.push_back({std::move(name), shape, std::move(reason)});
  }
  // A Linear layer's weight: may be stored fp8 with a block scale.
  void add_linear(std::string name, Shape shape, std::string reason = "") {
    out_.push_back({std::move(name), shape, std::move(reason), true});
  }

  // Pre-norm decoder layer norms and the SwiGLU MLP (docs/MODELS.md §1.2).
  void add_norms_and_mlp(const std::string& p, const std::string& why) {
    const int64_t H = c_.hidden_size, I = c_.intermediate_size;
    add(p + "input_layernorm.weight", {H}, why);
    add(p + "post_attention_layernorm.weight", {H}, why);
    add_linear(p + "mlp.gate_proj.weight", {I, H}, why);
    add_linear(p + "mlp.up_proj.weight", {I, H}, why);
    add_linear(p + "mlp.down_proj.weight", {H, I}, why);
  }

  // Softmax attention with per-head q/k norms; Qwen3.5's gated form doubles q_proj (docs/MODELS.md §3.2).
  void add_attention(const std::string& p, const std::string& why) {
    const int64_t H = c_.hidden_size, hd = c_.head_dim;
    const int64_t q_rows = c_.num_heads * hd * (c_.attn_output_gate ? 2 : 1), kv_rows = c_.num_kv_heads * hd;
    add_linear(p + "self_attn.q_proj.weight", {q_rows, H}, why);
    add_linear(p + "self_attn.k_proj.weight", {kv_rows, H}, why);
    add_linear(p + "self_attn.v_proj.weight", {kv_rows, H}, why);
    add_linear(p + "self_attn.o_proj.weight", {H, c_.num_heads * hd}, why);
    add(p + "self_attn.q_norm.weight", {hd}, why);
    add(p + "self_attn.k_norm.weight", {hd}, why);
    if (c_.attention_bias) {
      add(p + "self_attn.q_proj.bias", {q_rows}, why + ", attention_bias is true");
      add(p + "self_attn.k_proj.bias", {kv_rows}, why + ", attention_bias is true");
      add(p + "self_attn.v_proj.bias", {kv_rows}, why + ", attention_bias is true");
      add(p + "self_attn.o_proj.bias", {H}, why + ", attention_bias is true");
    }
  }

  // Qwen3.5 Gated DeltaNet: separate qkv / z / b / a projections (docs/MODELS.md §3.6, §3.7).
  void add_gated_deltanet(const std::string& p, const std::string& why) {
    const int64_t H = c_.hidden_size, Hk = c_.linear_num_key_heads, Hv = c_.linear_num_value_heads;
    const int64_t dk = c_.linear_key_head_dim, dv = c_.linear_value_head_dim;
    const int64_t conv_dim = 2 * Hk * dk + Hv * dv;
    add_linear(p + "linear_attn.in_proj_qkv.weight", {conv_dim, H}, why);
    add_linear(p + "linear_attn.in_proj_z.weight", {Hv * dv, H}, why);
    add_linear(p + "linear_attn.in_proj_b.weight", {Hv, H}, why);
    add_linear(p + "linear_attn.in_proj_a.weight", {Hv, H}, why);
    add(p + "linear_attn.conv1d.weight", {conv_dim, 1, c_.linear_conv_kernel_dim}, why);
    add(p + "linear_attn.A_log", {Hv}, why);
    add(p + "linear_attn.dt_bias", {Hv}, why);
    add(p + "linear_attn.norm.weight", {dv}, why);
    add_linear(p + "linear_attn.out_proj.weight", {H, Hv * dv}, why);
  }

 private:
  const ModelConfig& c_;
  std::vector<ExpectedTensor> out_;
};

// The tensor whose presence identifies where a family's weights sit.
std::string anchor_tensor(ModelFamily family) {
  return family == ModelFamily::DFlashDrafter ? "fc.weight" : "embed_tokens.weight";
}

// Tensors of drafter variants whose math differs from DFlash (docs/DFLASH.md §1.9): loading one as a plain
// DFlash drafter would run, acceptance would collapse without an error; refuse it, naming the variant.
struct VariantMarker {
  std::string_view fragment, variant;
};
constexpr std::array<VariantMarker, 5> kVariantMarkers = {{
    {"attention_conv.", "DFlash2"},
    {"mlp_conv.", "DFlash2"},
    {"candidate_selector.", "DFlash2"},
    {"markov_head.", "DSpark"},
    {"confidence_head.", "DSpark"},
}};

void reject_unsupported_drafter_variants(const Checkpoint& ckpt) {
  for (const auto& name : ckpt.names())
    for (const auto& m : kVariantMarkers)
      if (name.find(m.fragment) != std::string::npos)
        fail("tensor {} belongs to a {} drafter, which is not supported (only plain DFlash drafters are)",
             quoted_name(name), m.variant);
}

bool is_plain_float(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

// "'a', 'b', 'c' and 7 more": the first few names of a list for a one-line error.
std::string first_names(const std::vector<std::string>& names, size_t shown = 3) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < shown; ++i) out += (i ? ", " : "") + quoted_name(names[i]);
  if (names.size() > shown) out += fmt::format(" and {} more", names.size() - shown);
  return out;
}

// Checks the block scale of fp8 Linear weight `t` (present, [ceil(out/128), ceil(in/128)], F32 / F16 / BF16);
// returns its name.
std::string check_fp8_scale(const Checkpoint& ckpt, const ExpectedTensor& t) {
  const std::string scale = fp8_scale_name(t.name);
  const Shape want = fp8_scale_shape(t.shape);
  if (!ckpt.contains(scale))
    fail("{}: fp8 weight {} has no scale tensor {} {} (one multiplier per 128×128 block)", ckpt.path(),
         quoted_name(t.name), quoted_name(scale), want.to_string());
  const SafetensorsEntry& e = ckpt.entry(scale);
  if (!(e.shape == want))
    fail("{}: scale tensor {} has shape {}; the 128×128 blocks of {} {} need {}", ckpt.path(), quoted_name(scale),
         e.shape.to_string(), quoted_name(t.name), t.shape.to_string(), want.to_string());
  if (!is_fp8_scale_dtype(e.dtype))
    fail("{}: scale tensor {} has dtype {}; scales must be F32, F16 or BF16", ckpt.path(), quoted_name(scale),
         dtype_name(e.dtype));
  return scale;
}

// A scale next to a weight the model reads that is not fp8 would be silently dropped: refuse it by name.
void reject_scales_of_float_weights(const Checkpoint& ckpt, const std::set<std::string, std::less<>>& read) {
  constexpr std::string_view kScaleSuffix = "_scale_inv";
  for (const auto& name : ckpt.names()) {
    if (read.count(name) || !name.ends_with(kScaleSuffix)) continue;
    const std::string weight = name.substr(0, name.size() - kScaleSuffix.size());
    if (read.count(weight))
      fail("{}: tensor {} scales {}, which is stored as {}, not F8_E4M3", ckpt.path(), quoted_name(name),
           quoted_name(weight), dtype_name(ckpt.entry(weight).dtype));
  }
}

std::string find_prefix(const ModelConfig& c, const Checkpoint& ckpt) {
  const std::string anchor = anchor_tensor(c.family);
  std::string looked_for;
  for (const auto& prefix : candidate_weight_prefixes(c.family)) {
    if (ckpt.contains(prefix + anchor)) return prefix;
    looked_for += (looked_for.empty() ? "" : " or ") + quoted_name(prefix + anchor);
  }
  fail("{}: no {} tensor, so this is not a {} checkpoint", ckpt.path(), looked_for, family_name(c.family));
}

}  // namespace

bool is_known_extra_tensor(const ModelConfig& c, std::string_view name) {
  if (name.ends_with("rotary_emb.inv_freq")) return true;
  if (c.family == ModelFamily::DFlashDrafter) return false;
  if (name == "lm_head.weight") return c.tie_word_embeddings;
  for (std::string_view part : {"model.visual.", "visual.", "mtp."})
    if (name.starts_with(part)) return true;
  return false;
}

void require_implemented(const ModelConfig& c, const Checkpoint& ckpt) {
  if (!c.quantization_unimplemented.empty())
    fail(
        "{}: quantization '{}' with {} is not implemented: specserve loads fp8 checkpoints of e4m3 weights with "
        "one scale per 128×128 block and dynamic activations (docs/MODELS.md §6)",
        ckpt.path(), c.quantization, c.quantization_unimplemented);
  if (!c.quantization.empty() && !c.fp8_block128)
    fail(
        "{}: quantization '{}' is not implemented: specserve loads checkpoints whose weights are f32, f16 or "
        "bf16, and Qwen's fp8 block-128 format",
        ckpt.path(), c.quantization);
  if (c.rope_type != "default")
    fail("{}: rope type '{}' is not implemented (only plain RoPE): positions would be encoded wrongly", ckpt.path(),
         c.rope_type);
}

std::vector<std::string> candidate_weight_prefixes(ModelFamily family) {
  switch (family) {
    case ModelFamily::Qwen3: return {"model."};
    case ModelFamily::Qwen3_5: return {"model.language_model.", "model."};
    case ModelFamily::DFlashDrafter: return {"", "model."};
  }
  return {};
}

std::vector<ExpectedTensor> expected_tensors(const ModelConfig& c, std::string_view prefix_view) {
  SS_CHECK(c.layer_types.size() == static_cast<size_t>(c.num_layers), "model config has {} layer types for {} layers",
           c.layer_types.size(), c.num_layers);
  const std::string prefix(prefix_view);
  const int64_t H = c.hidden_size;
  TensorList list(c);
  if (c.family == ModelFamily::DFlashDrafter) {
    const auto taps = static_cast<int64_t>(c.dflash ? c.dflash->target_layer_ids.size() : 0);
    list.add_linear(prefix + "fc.weight", {H, taps * H}, "fc projects the concatenated target_layer_ids features");
    list.add(prefix + "hidden_norm.weight", {H});
  } else {
    list.add(prefix + "embed_tokens.weight", {c.vocab_size, H});
  }
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string p = prefix + "layers." + std::to_string(i) + ".";
    const std::string why = fmt::format("layer {} is {}", i, layer_type_name(c.layer_types[i]));
    list.add_norms_and_mlp(p, why);
    if (c.layer_types[i] == LayerType::LinearAttention)
      list.add_gated_deltanet(p, why);
    else
      list.add_attention(p, why);
  }
  list.add(prefix + "norm.weight", {H});
  if (c.family != ModelFamily::DFlashDrafter && !c.tie_word_embeddings)
    list.add_linear("lm_head.weight", {c.vocab_size, H}, "tie_word_embeddings is false");
  return list.take();
}

CheckpointLayout resolve_checkpoint_layout(const ModelConfig& c, const Checkpoint& ckpt) {
  require_implemented(c, ckpt);
  if (c.family == ModelFamily::DFlashDrafter) reject_unsupported_drafter_variants(ckpt);
  CheckpointLayout layout;
  layout.prefix = find_prefix(c, ckpt);
  layout.tensors = expected_tensors(c, layout.prefix);
  std::set<std::string, std::less<>> read;
  for (const auto& t : layout.tensors) {
    if (!ckpt.contains(t.name))
      fail("{}: missing tensor {} {}{}", ckpt.path(), quoted_name(t.name), t.shape.to_string(),
           t.reason.empty() ? "" : " (" + t.reason + ")");
    const SafetensorsEntry& e = ckpt.entry(t.name);
    if (!(e.shape == t.shape))
      fail("{}: tensor {} has shape {}, the config implies {}", ckpt.path(), quoted_name(t.name), e.shape.to_string(),
           t.shape.to_string());
    read.insert(t.name);
    if (c.fp8_block128 && t.linear && e.dtype == DType::F8_E4M3) {
      read.insert(check_fp8_scale(ckpt, t));
      layout.fp8_weights.push_back(t.name);
    } else if (!is_plain_float(e.dtype)) {
      const std::string_view why =
          e.dtype != DType::F8_E4M3 ? "weights must be F32, F16 or BF16"
          : c.fp8_block128 ? "the model reads it as F32, F16 or BF16 (fp8 checkpoints quantise only Linear weights)"
                           : "weights must be F32, F16 or BF16 (fp8 weights need a quantization_config)";
      fail("{}: tensor {} has dtype {}; {}", ckpt.path(), quoted_name(t.name), dtype_name(e.dtype), why);
    }
  }
  reject_scales_of_float_weights(ckpt, read);
  if (c.family != ModelFamily::DFlashDrafter)
    layout.head = c.tie_word_embeddings ? layout.prefix + "embed_tokens.weight" : "lm_head.weight";
  std::vector<std::string> unread;
  for (const auto& name : ckpt.names()) {
    if (read.count(name)) continue;
    (is_known_extra_tensor(c, name) ? layout.unused : unread).push_back(name);
  }
  if (!unread.empty())
    fail("{}: {} tensor{} the {} architecture does not read, so this is not the model config.json describes: {}",
         ckpt.path(), unread.size(), unread.size() == 1 ? "" : "s", family_name(c.family), first_names(unread));
  return layout;
}

}  // namespace specserve
