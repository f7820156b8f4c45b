// Qwen3.5 / Qwen3.6 dense hybrid (docs/MODELS.md §3): zero-centred norms (1 + w), Gated DeltaNet layers
// and gated full-attention layers (per-head [query | gate] q_proj, partial RoPE), SwiGLU MLP in every
// layer. M-RoPE reduces to 1-D partial RoPE for text. Loads the flat `model.*` layout and the
// Qwen3_5ForConditionalGeneration `model.language_model.*` layout alike (WeightStore resolves it).
#include "core/error.h"
#include "model/layers.h"

namespace specserve {

ModelParts build_qwen3_5(const ModelConfig& cfg, WeightStore& w) {
  ModelParts parts;
  ArchSpec& s = parts.spec;
  s = ArchSpec::from(cfg, NormKind::ZeroCentred, /*attn_output_gate=*/true);
  s.gdn = GdnDims{cfg.linear_num_key_heads, cfg.linear_num_value_heads, cfg.linear_key_head_dim,
                  cfg.linear_value_head_dim, cfg.linear_conv_kernel_dim};
  SS_CHECK(!cfg.attention_bias, "qwen3_5: attention_bias is not supported");
  SS_CHECK(static_cast<int>(cfg.layer_types.size()) == cfg.num_layers, "qwen3_5: {} layer types for {} layers",
           cfg.layer_types.size(), cfg.num_layers);
  int attn_slot = 0, gdn_slot = 0;
  for (int i = 0; i < cfg.num_layers; ++i) {
    DecoderLayer l;
    l.type = cfg.layer_types[i];
    const std::string p = "layers." + std::to_string(i) + ".";
    l.input_norm = w.text_vector(p + "input_layernorm.weight", {s.hidden});
    l.post_norm = w.text_vector(p + "post_attention_layernorm.weight", {s.hidden});
    if (l.type == LayerType::LinearAttention) {
      SS_CHECK(s.gdn.num_k_heads > 0 && s.gdn.num_v_heads % s.gdn.num_k_heads == 0 && s.gdn.conv_kernel >= 1,
               "qwen3_5: bad linear-attention dimensions");
      l.deltanet = load_deltanet(w, s, i, gdn_slot++);
    } else if (l.type == LayerType::FullAttention) {
      l.attn = load_attention(w, s, i, attn_slot++);
    } else {
      fail("qwen3_5: layer {} has unsupported type {}", i, layer_type_name(l.type));
    }
    l.mlp = load_mlp(w, s, i);
    parts.layers.push_back(std::move(l));
  }
  load_head(w, cfg, parts);
  return parts;
}

}  // namespace specserve
