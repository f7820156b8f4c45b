#pragma once
// A z-lab DFlash drafter checkpoint (docs/DFLASH.md §2): config.json with `dflash_config` and the
// safetensors tensors fc / hidden_norm / norm and per-layer Qwen3 attention + MLP weights (names
// with or without a `model.` prefix). The drafter has no embedding and no lm_head: it borrows the
// target's, so loading it is only meaningful against a target, and this is where a mismatched pair
// is caught (§2.3) — a wrong pair otherwise loads fine and silently accepts nothing.
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "model/synthetic_tensors.h"

namespace specserve::spec {

struct DrafterLayerWeights {
  LayerType type = LayerType::FullAttention;  // FullAttention or SlidingAttention
  TensorView input_norm, post_norm;           // f32 [H]
  TensorView q_proj, k_proj, v_proj, o_proj;  // matrices
  TensorView q_norm, k_norm;                  // f32 [head_dim]
  TensorView gate, up, down;                  // matrices
};

struct DrafterWeights {
  TensorView fc;           // [H, K·H] matrix
  TensorView hidden_norm;  // f32 [H]
  TensorView norm;         // f32 [H]
  std::vector<DrafterLayerWeights> layers;
};

// What the drafter needs to know about its target (TargetModel's config and head).
struct TargetShape {
  int64_t hidden = 0;
  int64_t vocab = 0;           // lm_head rows
  int64_t embedding_rows = 0;  // input embedding rows (the mask id must be one of them)
  int num_layers = 0;
};

class DrafterCheckpoint {
 public:
  // Reads DIR/config.json and the tensors, converting matrices to `matrix_dtype` (F32 or BF16;
  // zero-copy when the file already has it; the fp8 Linear weights of a block-128 checkpoint dequantised,
  // docs/MODELS.md §6) and vectors to f32. Throws Error on other quantisations, DFlash2 / DSpark
  // tensors, a non-drafter config, an unsupported rope, missing or misshapen tensors, and on any
  // mismatch with `target` (hidden size, vocab, fc width, target layer ids, mask id).
  static std::unique_ptr<DrafterCheckpoint> load(const std::string& dir, const TargetShape& target,
                                                 const std::string& dtype);

  // A drafter of `config`'s shapes with seeded random weights made by `tensors` (in its memory, e.g.
  // on the device), for benchmarks on real shapes (model/synthetic_tensors.h).
  static std::unique_ptr<DrafterCheckpoint> synthetic(const ModelConfig& config, const TargetShape& target,
                                                      DType matrix_dtype, std::shared_ptr<SyntheticTensors> tensors);

  const ModelConfig& config() const { return config_; }
  const DFlashConfig& dflash() const { return *config_.dflash; }
  const DrafterWeights& weights() const { return weights_; }
  DType matrix_dtype() const { return matrix_dtype_; }

 private:
  DrafterCheckpoint() = default;
  TensorView tensor(const std::string& name, const Shape& shape, bool matrix);
  void read_weights();  // every tensor of config_, through tensor()

  ModelConfig config_;
  std::unique_ptr<Checkpoint> file_;
  std::shared_ptr<SyntheticTensors> synthetic_;  // instead of file_
  std::string prefix_;                           // "" or "model."
  DType matrix_dtype_ = DType::F32;
  DrafterWeights weights_;
  std::deque<Tensor> owned_;  // converted copies (stable addresses)
};

}  // namespace specserve::spec
