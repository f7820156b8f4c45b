// Qwen3 dense (docs/MODELS.md §2): plain RMSNorms (also per-head q/k norms before RoPE), full RoPE, GQA,
// tied or untied head. Every layer is attention + SwiGLU MLP.
#include "core/error.h"
#include "model/layers.h"

namespace specserve {

ModelParts build_qwen3(const ModelConfig& cfg, WeightStore& w) {
  ModelParts parts;
  ArchSpec& s = parts.spec;
  s = ArchSpec::from(cfg, NormKind::Plain, /*attn_output_gate=*/false);
  SS_CHECK(!cfg.attention_bias, "qwen3: attention_bias is not supported");
  for (int i = 0; i < cfg.num_layers; ++i) {
    SS_CHECK(cfg.layer_types.empty() || cfg.layer_types[i] == LayerType::FullAttention,
             "qwen3: layer {} is {}, only full attention is supported", i, layer_type_name(cfg.layer_types[i]));
    DecoderLayer l;
    l.type = LayerType::FullAttention;
    const std::string p = "layers." + std::to_string(i) + ".";
    l.input_norm = w.text_vector(p + "input_layernorm.weight", {s.hidden});
    l.post_norm = w.text_vector(p + "post_attention_layernorm.weight", {s.hidden});
    l.attn = load_attention(w, s, i, i);
    l.mlp = load_mlp(w, s, i);
    parts.layers.push_back(std::move(l));
  }
  load_head(w, cfg, parts);
  return parts;
}

}  // namespace specserve
