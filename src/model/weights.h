#pragma once
// Checkpoint tensors for the model: resolves the text-stack prefix (`model.` for Qwen3ForCausalLM /
// Qwen3_5ForCausalLM, `model.language_model.` for Qwen3_5ForConditionalGeneration; `model.visual.*`
// and `mtp.*` are simply never asked for) and converts what it hands out:
//   - matrices (matmul weights, embedding table) to the storage dtype; when the checkpoint already has
//     it they are copied into process memory, or left as zero-copy views of the file mapping when
//     `map_matrices` is set (decode read them about 2x slower through the mapping on the development
//     VM, see docs/BENCHMARKS.md);
//   - matrices of an fp8 block-128 checkpoint (F8_E4M3 with a weight_scale_inv, io/fp8_blocks.h) are
//     dequantised exactly into f32 and then rounded into the storage dtype, once, at load: the forward runs
//     them like any float weight (docs/MODELS.md §6);
//     With keep_fp8 (`--fp8-weights keep`, docs/MODELS.md §6.1) the weights of Linear layers (linear()) stay
//     fp8 instead: the e4m3 codes as they are (copied, or mapped with `map_matrices`) and their scales as
//     f32, a block-scaled TensorView (core/tensor.h TensorView::scales) whose matmul has the bits of the
//     bf16 dequantisation (backend/ops.h, Ops::matmul);
//   - vectors and small parameters (norms, conv, A_log, dt_bias) to owned f32 copies.
#include <deque>
#include <memory>
#include <string>

#include "core/tensor.h"
#include "io/safetensors.h"
#include "model/synthetic_tensors.h"

namespace specserve {

class WeightStore {
 public:
  WeightStore(std::unique_ptr<Checkpoint> checkpoint, DType matrix_dtype, bool map_matrices = false);
  // No checkpoint: every tensor is made by `synthetic` (model/synthetic_tensors.h) in its memory,
  // with the text-stack prefix "model.".
  WeightStore(std::shared_ptr<SyntheticTensors> synthetic, DType matrix_dtype);
  bool is_synthetic() const { return synthetic_ != nullptr; }

  const std::string& prefix() const { return prefix_; }
  DType matrix_dtype() const { return matrix_dtype_; }
  // The dtype most matrices have in the checkpoint (for --dtype auto).
  static DType checkpoint_matrix_dtype(const Checkpoint& c);
  static std::string resolve_prefix(const Checkpoint& c);

  bool has(const std::string& name) const { return synthetic_ || checkpoint_->contains(name); }
  // `name` is the full tensor name; `shape` the expected shape (checked).
  TensorView matrix(const std::string& name, const Shape& shape);
  TensorView vector_f32(const std::string& name, const Shape& shape);
  // The weight of a Linear layer of the decoder stack (q/k/v/o, MLP, DeltaNet projections): matrix(),
  // except that with keep_fp8 an fp8 weight stays fp8 (block-scaled, see above). The embedding table and
  // lm_head use matrix(): Qwen ships them in bf16, and the host-side helpers read them as floats.
  TensorView linear(const std::string& name, const Shape& shape);
  TensorView text_linear(const std::string& name, const Shape& shape) { return linear(prefix_ + name, shape); }
  // Keep fp8 Linear weights fp8 (needs the bf16 matrix dtype: the kept weights compute as their bf16
  // dequantisation). Off by default. Synthetic: every Linear weight but in_proj_a / in_proj_b (bf16 in Qwen's
  // fp8 releases) is made fp8 (SyntheticTensors::make_fp8), as a real fp8 checkpoint's would be kept.
  void set_keep_fp8(bool keep);
  bool keep_fp8() const { return keep_fp8_; }
  // Text-stack tensor: prefix() + name.
  TensorView text_matrix(const std::string& name, const Shape& shape) { return matrix(prefix_ + name, shape); }
  TensorView text_vector(const std::string& name, const Shape& shape) { return vector_f32(prefix_ + name, shape); }

 private:
  TensorView checked(const std::string& name, const Shape& shape) const;

  std::unique_ptr<Checkpoint> checkpoint_;
  std::shared_ptr<SyntheticTensors> synthetic_;
  DType matrix_dtype_;
  bool map_matrices_ = false;
  bool keep_fp8_ = false;
  std::string prefix_;
  std::deque<Tensor> owned_;  // converted copies (stable addresses)
};

}  // namespace specserve
