#include "spec/dflash_checkpoint.h"

#include <array>
#include <string_view>

#include "core/error.h"
#include "io/checkpoint_layout.h"
#include "io/fp8_blocks.h"

namespace specserve::spec {
namespace {

// auto: the checkpoint's (bf16 when fc is bf16, f32 otherwise), and bf16 for an fp8 checkpoint, as for targets
// (docs/MODELS.md §6).
DType choose_dtype(const std::string& option, const Checkpoint& c, const std::string& fc_name, bool fp8) {
  if (option == "f32") return DType::F32;
  if (option == "bf16") return DType::BF16;
  SS_CHECK(option == "auto", "--dtype must be auto, f32 or bf16 (got '{}')", option);
  return fp8 || c.entry(fc_name).dtype == DType::BF16 ? DType::BF16 : DType::F32;
}

void check_pair(const ModelConfig& d, const TargetShape& t) {
  const DFlashConfig& df = *d.dflash;
  SS_CHECK(d.hidden_size == t.hidden,
           "drafter hidden_size {} differs from the target's {}: wrong target for this drafter", d.hidden_size,
           t.hidden);
  SS_CHECK(d.vocab_size == t.vocab,
           "drafter vocab_size {} differs from the target's lm_head rows {}: wrong target for this drafter",
           d.vocab_size, t.vocab);
  SS_CHECK(df.num_target_layers == 0 || df.num_target_layers == t.num_layers,
           "the drafter was trained on a {}-layer target (num_target_layers) but the target has {} layers",
           df.num_target_layers, t.num_layers);
  for (int id : df.target_layer_ids)
    SS_CHECK(id < t.num_layers, "drafter target_layer_ids holds {}, but the target has only {} layers", id,
             t.num_layers);
  SS_CHECK(df.mask_token_id < t.embedding_rows,
           "drafter mask_token_id {} is not a row of the target's {}-row embedding table", df.mask_token_id,
           t.embedding_rows);
}

}  // namespace

TensorView DrafterCheckpoint::tensor(const std::string& name, const Shape& shape, bool matrix) {
  const std::string full = prefix_ + name;
  if (synthetic_) return synthetic_->make(full, shape, matrix ? matrix_dtype_ : DType::F32);
  SS_CHECK(file_->contains(full), "drafter checkpoint lacks tensor '{}'", full);
  TensorView v = file_->get(full);
  SS_CHECK(v.shape == shape, "drafter tensor '{}' has shape {}, expected {}", full, v.shape.to_string(),
           shape.to_string());
  const DType want = matrix ? matrix_dtype_ : DType::F32;
  if (v.dtype == DType::F8_E4M3) {
    // A Linear weight of Qwen's block-128 fp8 (resolve_checkpoint_layout accepted it and its scale):
    // dequantised once, here, as a target's (model/weights.cpp).
    owned_.push_back(dequantize_fp8_blocks(v, file_->get(fp8_scale_name(full)), want, full));
    return owned_.back().view();
  }
  SS_CHECK(is_float(v.dtype), "drafter tensor '{}' has non-float dtype {}", full, dtype_name(v.dtype));
  if (v.dtype == want) return v;
  Tensor f = to_f32(v);
  owned_.push_back(want == DType::F32 ? std::move(f) : from_f32(f, want));
  return owned_.back().view();
}

std::unique_ptr<DrafterCheckpoint> DrafterCheckpoint::load(const std::string& dir, const TargetShape& target,
                                                           const std::string& dtype) {
  return with_context("loading drafter " + dir, [&] {
    std::unique_ptr<DrafterCheckpoint> d(new DrafterCheckpoint());
    d->config_ = load_model_config(dir);
    const ModelConfig& c = d->config_;
    SS_CHECK(c.family == ModelFamily::DFlashDrafter && c.dflash,
             "config.json describes a {} model, not a DFlash drafter (architectures DFlashDraftModel)",
             family_name(c.family));
    SS_CHECK(!c.attention_bias, "drafters with attention_bias are not supported");
    d->file_ = Checkpoint::open(dir);
    // Refuses quantisations other than Qwen's fp8 block-128, RoPE scaling, DFlash2 / DSpark tensors and any tensor a
    // DFlash drafter does not read.
    resolve_checkpoint_layout(c, *d->file_);
    // z-lab files have no prefix; some re-uploads add `model.` (docs/DFLASH.md §2.2).
    if (d->file_->contains("fc.weight"))
      d->prefix_ = "";
    else if (d->file_->contains("model.fc.weight"))
      d->prefix_ = "model.";
    else
      fail("checkpoint has no fc.weight (nor model.fc.weight): not a DFlash drafter");
    d->matrix_dtype_ = choose_dtype(dtype, *d->file_, d->prefix_ + "fc.weight", c.fp8_block128);
    check_pair(c, target);

    const int64_t H = c.hidden_size;
    const int64_t K = static_cast<int64_t>(c.dflash->target_layer_ids.size());
    const TensorView fc = d->file_->get(d->prefix_ + "fc.weight");
    SS_CHECK(
        fc.ndim() == 2 && fc.dim(0) == H && fc.dim(1) == K * H,
        "drafter fc.weight is {} but {} target layers of hidden size {} need [{}, {}]: wrong target for this drafter",
        fc.shape.to_string(), K, H, H, K * H);
    d->read_weights();
    return d;
  });
}

std::unique_ptr<DrafterCheckpoint> DrafterCheckpoint::synthetic(const ModelConfig& config, const TargetShape& target,
                                                                DType matrix_dtype,
                                                                std::shared_ptr<SyntheticTensors> tensors) {
  SS_CHECK(config.family == ModelFamily::DFlashDrafter && config.dflash, "a synthetic drafter needs a drafter config");
  std::unique_ptr<DrafterCheckpoint> d(new DrafterCheckpoint());
  d->config_ = config;
  d->matrix_dtype_ = matrix_dtype;
  d->synthetic_ = std::move(tensors);
  check_pair(config, target);
  d->read_weights();
  return d;
}

void DrafterCheckpoint::read_weights() {
  const ModelConfig& c = config_;
  const int64_t H = c.hidden_size, I = c.intermediate_size, hd = c.head_dim;
  const int64_t K = static_cast<int64_t>(c.dflash->target_layer_ids.size());
  DrafterWeights& w = weights_;
  w.fc = tensor("fc.weight", {H, K * H}, true);
  w.hidden_norm = tensor("hidden_norm.weight", {H}, false);
  w.norm = tensor("norm.weight", {H}, false);
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string p = "layers." + std::to_string(i) + ".";
    DrafterLayerWeights l;
    l.type = c.layer_types.at(static_cast<size_t>(i));
    SS_CHECK(l.type != LayerType::LinearAttention, "drafter layer {} is linear_attention, which drafters do not have",
             i);
    l.input_norm = tensor(p + "input_layernorm.weight", {H}, false);
    l.post_norm = tensor(p + "post_attention_layernorm.weight", {H}, false);
    l.q_proj = tensor(p + "self_attn.q_proj.weight", {c.num_heads * hd, H}, true);
    l.k_proj = tensor(p + "self_attn.k_proj.weight", {c.num_kv_heads * hd, H}, true);
    l.v_proj = tensor(p + "self_attn.v_proj.weight", {c.num_kv_heads * hd, H}, true);
    l.o_proj = tensor(p + "self_attn.o_proj.weight", {H, c.num_heads * hd}, true);
    l.q_norm = tensor(p + "self_attn.q_norm.weight", {hd}, false);
    l.k_norm = tensor(p + "self_attn.k_norm.weight", {hd}, false);
    l.gate = tensor(p + "mlp.gate_proj.weight", {I, H}, true);
    l.up = tensor(p + "mlp.up_proj.weight", {I, H}, true);
    l.down = tensor(p + "mlp.down_proj.weight", {H, I}, true);
    w.layers.push_back(l);
  }
}

}  // namespace specserve::spec
