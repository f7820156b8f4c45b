#pragma once
// Hugging Face config.json for the supported families (docs/MODELS.md, docs/DFLASH.md §2.1):
//   qwen3 (Qwen3ForCausalLM), qwen3_5 / qwen3_5_text (Qwen3_5ForConditionalGeneration with nested
//   text_config, or Qwen3_5ForCausalLM), and DFlash drafters (DFlashDraftModel, model_type qwen3).
// Unsupported architectures and missing / ill-typed keys give an Error naming the key.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"

namespace specserve {

enum class ModelFamily { Qwen3, Qwen3_5, DFlashDrafter };
enum class LayerType { FullAttention, LinearAttention, SlidingAttention };

std::string_view family_name(ModelFamily f);
std::string_view layer_type_name(LayerType t);

struct DFlashConfig {
  int block_size = 16;
  int num_target_layers = 0;  // L_T; 0 when the config does not say (then ids are not range-checked)
  int64_t mask_token_id = 0;
  std::vector<int> target_layer_ids;  // "output of target layer l" convention (docs/DFLASH.md §8)
};

struct ModelConfig {
  ModelFamily family = ModelFamily::Qwen3;
  std::string model_type;                  // as in the file (text config's for qwen3_5)
  std::vector<std::string> architectures;  // top-level "architectures"
  bool nested_text_config = false;         // text keys under "text_config" (Qwen3_5ForConditionalGeneration)

  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  double partial_rotary_factor = 1.0;  // rotated dims = int(head_dim * factor)
  // "default" for plain RoPE. Qwen3.5's M-RoPE ("mrope", mrope_section) is plain RoPE for text
  // positions, so it is reported as "default". Other values ("yarn", "linear", ...) are recorded
  // as found so the model can refuse what it does not implement.
  std::string rope_type = "default";
  int64_t max_position_embeddings = 0;
  bool tie_word_embeddings = false;
  bool attention_bias = false;
  // Qwen3.5 gated attention: q_proj has 2·nh·hd rows, [query | gate] per head (docs/MODELS.md §3.2).
  bool attn_output_gate = false;
  std::optional<int> sliding_window;
  std::vector<LayerType> layer_types;  // one per layer

  // Gated DeltaNet (qwen3_5 linear_attention layers).
  int linear_conv_kernel_dim = 0;
  int linear_key_head_dim = 0;
  int linear_value_head_dim = 0;
  int linear_num_key_heads = 0;
  int linear_num_value_heads = 0;

  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;  // from "eos_token_id" (int or list)
  DType dtype = DType::BF16;           // "torch_dtype" / "dtype"
  // The checkpoint's quantisation scheme, empty when its weights are plain floats: quantization_config's
  // quant_method (top level or text_config), "compressed-tensors" for a compression_config, or the
  // quantize_config.json of GPTQ/AWQ exports. The loaders refuse every scheme they do not implement
  // (io/checkpoint_layout.h).
  std::string quantization;
  // Set when `quantization` is "fp8" with every quantization_config key at a value the loader implements:
  // Qwen's block-128 format (e4m3 weights, one multiplier per 128×128 block, dynamic activations;
  // io/fp8_blocks.h, docs/MODELS.md §6). The weights are dequantised when the model loads.
  bool fp8_block128 = false;
  // For any other fp8 config, the first key whose value is not implemented ("quantization_config.fmt
  // 'e5m2'"), for the loader's refusal.
  std::string quantization_unimplemented;

  std::optional<DFlashConfig> dflash;  // set for drafters

  int rotary_dim() const { return static_cast<int>(head_dim * partial_rotary_factor); }
  int num_attention_layers() const;
  int num_linear_layers() const;
};

// Parses the text of a config.json. Errors name the key, with its path for nested keys
// ("text_config.hidden_size", "dflash_config.mask_token_id").
ModelConfig parse_model_config(std::string_view json_text);
// Reads DIR/config.json (errors carry the path).
ModelConfig load_model_config(const std::string& dir);

// The z-lab default when a drafter config lacks target_layer_ids (docs/DFLASH.md §1.3): n ids evenly
// spaced from 1 to num_target_layers - 3, rounded half to even as Python's round() does.
std::vector<int> default_target_layer_ids(int num_target_layers, int n);

}  // namespace specserve
