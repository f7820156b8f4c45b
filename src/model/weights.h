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
  // Text-stack tensor: prefix() + name.
  TensorView text_matrix(const std::string& name, const Shape& shape) { return matrix(prefix_ + name, shape); }
  TensorView text_vector(const std::string& name, const Shape& shape) { return vector_f32(prefix_ + name, shape); }

 private:
  TensorView checked(const std::string& name, const Shape& shape) const;

  std::unique_ptr<Checkpoint> checkpoint_;
  std::shared_ptr<SyntheticTensors> synthetic_;
  DType matrix_dtype_;
  bool map_matrices_ = false;
  std::string prefix_;
  std::deque<Tensor> owned_;  // converted copies (stable addresses)
};

}  // namespace specserve
