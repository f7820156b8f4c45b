#include "model/weights.h"

#include <cstring>
#include <map>

#include "core/error.h"
#include "io/fp8_blocks.h"

namespace specserve {

WeightStore::WeightStore(std::unique_ptr<Checkpoint> checkpoint, DType matrix_dtype, bool map_matrices)
    : checkpoint_(std::move(checkpoint)), matrix_dtype_(matrix_dtype), map_matrices_(map_matrices) {
  prefix_ = resolve_prefix(*checkpoint_);
}

WeightStore::WeightStore(std::shared_ptr<SyntheticTensors> synthetic, DType matrix_dtype)
    : synthetic_(std::move(synthetic)), matrix_dtype_(matrix_dtype), prefix_("model.") {}

std::string WeightStore::resolve_prefix(const Checkpoint& c) {
  if (c.contains("model.language_model.embed_tokens.weight")) return "model.language_model.";
  if (c.contains("model.embed_tokens.weight")) return "model.";
  fail("checkpoint has neither model.embed_tokens.weight nor model.language_model.embed_tokens.weight");
}

DType WeightStore::checkpoint_matrix_dtype(const Checkpoint& c) {
  return c.entry(resolve_prefix(c) + "embed_tokens.weight").dtype;
}

TensorView WeightStore::checked(const std::string& name, const Shape& shape) const {
  SS_CHECK(checkpoint_->contains(name), "checkpoint lacks tensor '{}'", name);
  TensorView v = checkpoint_->get(name);
  SS_CHECK(v.shape == shape, "tensor '{}' has shape {}, expected {}", name, v.shape.to_string(), shape.to_string());
  SS_CHECK(is_float(v.dtype), "tensor '{}' has non-float dtype {}", name, dtype_name(v.dtype));
  return v;
}

TensorView WeightStore::matrix(const std::string& name, const Shape& shape) {
  if (synthetic_) return synthetic_->make(name, shape, matrix_dtype_);
  TensorView v = checked(name, shape);
  if (v.dtype == DType::F8_E4M3) {
    // Qwen's block-128 fp8 (resolve_checkpoint_layout accepted it): dequantised once, here.
    owned_.push_back(dequantize_fp8_blocks(v, checkpoint_->get(fp8_scale_name(name)), matrix_dtype_, name));
    return owned_.back().view();
  }
  if (v.dtype == matrix_dtype_) {
    if (map_matrices_) return v;
    Tensor t = Tensor::empty(v.dtype, v.shape);
    std::memcpy(t.as<void>(), v.data, t.nbytes());
    owned_.push_back(std::move(t));
    return owned_.back().view();
  }
  Tensor f = to_f32(v);
  owned_.push_back(matrix_dtype_ == DType::F32 ? std::move(f) : from_f32(f, matrix_dtype_));
  return owned_.back().view();
}

void WeightStore::set_keep_fp8(bool keep) {
  SS_CHECK(!keep || matrix_dtype_ == DType::BF16,
           "--fp8-weights keep computes with the bf16 dequantisation of the weights; it needs --dtype bf16 or auto, "
           "not {} (--dtype f32 is the exact dequantised reference: use --fp8-weights dequantise)",
           dtype_name(matrix_dtype_));
  keep_fp8_ = keep;
}

namespace {
// The Linear weights Qwen's fp8 releases leave in bf16 (docs/MODELS.md §6): the DeltaNet's small
// in_proj_a / in_proj_b. A synthetic fp8 shape keeps them bf16 too.
bool bf16_in_qwen_fp8(const std::string& name) {
  return name.find("linear_attn.in_proj_a.") != std::string::npos ||
         name.find("linear_attn.in_proj_b.") != std::string::npos;
}
}  // namespace

TensorView WeightStore::linear(const std::string& name, const Shape& shape) {
  if (synthetic_ && keep_fp8_ && !bf16_in_qwen_fp8(name)) return synthetic_->make_fp8(name, shape);
  if (synthetic_ || !keep_fp8_) return matrix(name, shape);
  TensorView v = checked(name, shape);
  if (v.dtype != DType::F8_E4M3) return matrix(name, shape);
  const std::string scale_name = fp8_scale_name(name);
  SS_CHECK(checkpoint_->contains(scale_name), "fp8 weight '{}' has no '{}'", name, scale_name);
  const TensorView scale = checkpoint_->get(scale_name);
  const Shape want = fp8_scale_shape(v.shape);
  SS_CHECK(scale.shape == want && is_fp8_scale_dtype(scale.dtype),
           "the scale of fp8 weight '{}' {} is {}; 128x128 blocks need F32, F16 or BF16 {}", name, v.shape.to_string(),
           scale.describe(), want.to_string());
  SS_CHECK(v.is_contiguous(), "fp8 weight '{}' is not contiguous", name);
  check_fp8_codes(v, name);  // (the dequantised path checks in dequantize_fp8_blocks)
  TensorView kept = v;
  if (!map_matrices_) {
    Tensor t = Tensor::empty(v.dtype, v.shape);
    std::memcpy(t.as<void>(), v.data, t.nbytes());
    owned_.push_back(std::move(t));
    kept = owned_.back().view();
  }
  owned_.push_back(to_f32(scale));  // F16 and BF16 scales widen exactly
  kept.scales = owned_.back().as<const float>();
  return kept;
}

TensorView WeightStore::vector_f32(const std::string& name, const Shape& shape) {
  if (synthetic_) return synthetic_->make(name, shape, DType::F32);
  TensorView v = checked(name, shape);
  SS_CHECK(v.dtype != DType::F8_E4M3, "tensor '{}' is F8_E4M3, but the model reads it as F32, F16 or BF16", name);
  owned_.push_back(to_f32(v));
  return owned_.back().view();
}

}  // namespace specserve
