#pragma once
// Builds small checkpoints for the layout and summary tests: a config.json plus a model.safetensors
// holding exactly the tensors the config implies (zeros), optionally edited first so a test can drop,
// rename or reshape one tensor.
#include <functional>
#include <string>
#include <vector>

#include "io/checkpoint_layout.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "io_test_util.h"

namespace specserve::test {

using TensorEdit = std::function<void(std::vector<ExpectedTensor>&)>;

inline ModelConfig write_checkpoint(const std::string& dir, const std::string& config_json, const std::string& prefix,
                                    const TensorEdit& edit = nullptr, DType dtype = DType::BF16) {
  write_bytes(dir + "/config.json", config_json);
  ModelConfig c = parse_model_config(config_json);
  std::vector<ExpectedTensor> tensors = expected_tensors(c, prefix);
  if (edit) edit(tensors);
  SafetensorsWriter w;
  for (const auto& t : tensors) w.add(t.name, Tensor::zeros(dtype, t.shape));
  w.write(dir + "/model.safetensors");
  return c;
}

inline void drop(std::vector<ExpectedTensor>& tensors, const std::string& name) {
  std::erase_if(tensors, [&](const ExpectedTensor& t) { return t.name == name; });
}

// A Qwen3.5 text model small enough to write in a test: 4 layers (3 DeltaNet + 1 attention).
inline std::string tiny_qwen3_5_config(bool nested, bool tied) {
  std::string text = R"("vocab_size": 64, "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 4,
    "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 8, "partial_rotary_factor": 0.5,
    "rope_parameters": {"rope_theta": 10000000, "rope_type": "default"},
    "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"],
    "linear_conv_kernel_dim": 4, "linear_key_head_dim": 4, "linear_value_head_dim": 4,
    "linear_num_key_heads": 2, "linear_num_value_heads": 4, "eos_token_id": 1)";
  std::string tie = tied ? "true" : "false";
  if (nested)
    return R"({"architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5",
      "tie_word_embeddings": )" +
           tie + R"(, "text_config": {"model_type": "qwen3_5_text", )" + text + "}}";
  return R"({"architectures": ["Qwen3_5ForCausalLM"], "model_type": "qwen3_5_text", "tie_word_embeddings": )" + tie +
         ", " + text + "}";
}

// A 2-layer DFlash drafter for a 36-layer target (docs/DFLASH.md §2.1, scaled down).
inline std::string tiny_dflash_config() {
  return R"({"architectures": ["DFlashDraftModel"], "model_type": "qwen3", "vocab_size": 64,
    "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 2, "num_attention_heads": 2,
    "num_key_value_heads": 1, "head_dim": 8, "rope_theta": 1000000, "block_size": 16, "num_target_layers": 36,
    "dflash_config": {"mask_token_id": 60, "target_layer_ids": [1, 9, 17, 25, 33]}, "dtype": "bfloat16"})";
}

}  // namespace specserve::test
