// The pre-norm decoder layer shared by every family (models.md §1.2), and the head loader.
#include "core/error.h"
#include "model/layers.h"

namespace specserve {

void BlockInput::matmul_multi(const BatchContext& ctx, std::span<const TensorView> ws,
                              std::span<const TensorView> ys) const {
  if (norm != nullptr)
    ctx.ops->norm_matmul_multi(x, *norm, ctx.spec->norm, ctx.spec->eps, normed, ws, ys);
  else
    ctx.ops->matmul_multi(x, ws, ys);
}

void BlockOutput::matmul(const BatchContext& ctx, const TensorView& a, const TensorView& w) const {
  if (!accumulate) return ctx.ops->matmul(a, w, out);
  if (ctx.ops->matmul_accumulate(a, w, out)) return;
  ctx.ops->matmul(a, w, scratch);
  ctx.ops->add(out, scratch);
}

void DecoderLayer::forward(BatchContext& ctx, const TensorView& x, const TensorView& normed,
                           const TensorView* next_norm) const {
  const Ops& ops = *ctx.ops;
  const ArchSpec& s = *ctx.spec;
  MemTensor mixed = MemTensor::empty(*ctx.mem, DType::F32, x.shape);
  auto mixer = [&](const BlockInput& in, const BlockOutput& out) {
    if (type == LayerType::LinearAttention)
      deltanet.forward(ctx, in, out);
    else
      attn.forward(ctx, in, out);
  };
  if (norms_in_matmuls(ctx)) {
    const BlockOutput residual{x, true, mixed};
    mixer(BlockInput{x, &input_norm, normed}, residual);
    mlp.forward(ctx, BlockInput{x, &post_norm, normed}, residual);
    return;
  }
  mixer(BlockInput{normed, nullptr, {}}, BlockOutput{mixed, false, {}});
  ops.add_rms_norm(x, mixed, post_norm, s.norm, s.eps, normed);
  mlp.forward(ctx, BlockInput{normed, nullptr, {}}, BlockOutput{mixed, false, {}});
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
