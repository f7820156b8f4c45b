// The pre-norm decoder layer shared by every family (docs/MODELS.md §1.2), and the head loader.
#include "core/error.h"
#include "model/layers.h"

namespace specserve {

void DecoderLayer::forward(BatchContext& ctx, const TensorView& x, const TensorView& normed,
                           const TensorView* next_norm) const {
  const Ops& ops = *ctx.ops;
  const ArchSpec& s = *ctx.spec;
  MemTensor mixed = MemTensor::empty(*ctx.mem, DType::F32, x.shape);
  if (type == LayerType::LinearAttention)
    deltanet.forward(ctx, normed, mixed);
  else
    attn.forward(ctx, normed, mixed);
  ops.add_rms_norm(x, mixed, post_norm, s.norm, s.eps, normed);
  mlp.forward(ctx, normed, mixed);
  if (next_norm != nullptr)
    ops.add_rms_norm(x, mixed, *next_norm, s.norm, s.eps, normed);
  else
    ops.add(x, mixed);
}

void load_head(WeightStore& w, const ModelConfig& cfg, ModelParts& parts) {
  const ArchSpec& s = parts.spec;
  parts.embed = w.text_matrix("embed_tokens.weight", {s.vocab, s.hidden});
  parts.final_norm = w.text_vector("norm.weight", {s.hidden});
  // lm_head.weight sits at the top level in both layouts; tied models (or files without it) use the
  // embedding.
  if (!cfg.tie_word_embeddings && w.has("lm_head.weight"))
    parts.lm_head = w.matrix("lm_head.weight", {s.vocab, s.hidden});
  else
    parts.lm_head = parts.embed;
}

}  // namespace specserve
