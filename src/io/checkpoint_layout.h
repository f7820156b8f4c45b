#pragma once
// Which tensors a model reads from its checkpoint, and under which names: resolves the weight prefix
// of the layouts in docs/MODELS.md §2.4/§3.6 and docs/DFLASH.md §2.2, lists every tensor the config implies
// with its shape, and checks a checkpoint against that list. The model loader reads the same list,
// so a checkpoint that passes here is one the loader finds every tensor in.
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"
#include "io/model_config.h"
#include "io/safetensors.h"

namespace specserve {

struct ExpectedTensor {
  std::string name;
  Shape shape;
  std::string reason;  // why the config implies it, for error messages ("layer 3 is full_attention")
  // A Linear layer's weight [out, in], the only kind of tensor an fp8 checkpoint may quantise (with its
  // block scale, io/fp8_blocks.h); every other tensor is read as F32, F16 or BF16.
  bool linear = false;
};

struct CheckpointLayout {
  // "model." (flat), "model.language_model." (Qwen3.5/3.6 vision-language checkpoints), or for
  // drafters "" (z-lab) or "model." (some re-uploads).
  std::string prefix;
  // The tensor the output head multiplies by: "lm_head.weight", or the embedding when tied. Empty
  // for drafters, which use their target's head.
  std::string head;
  std::vector<ExpectedTensor> tensors;  // every tensor the model reads, embedding/fc first, then per layer
  std::vector<std::string> unused;      // present, not read, and a known extra (is_known_extra_tensor)
  // The Linear weights stored as F8_E4M3, each with its scale fp8_scale_name(name) (checked: present, of
  // shape fp8_scale_shape, F32 / F16 / BF16). Empty unless the config declares the fp8 block-128 format.
  std::vector<std::string> fp8_weights;

  std::string layer_prefix(int layer) const { return prefix + "layers." + std::to_string(layer) + "."; }
};

// The prefixes a family's weights may sit under, in the order they are tried.
std::vector<std::string> candidate_weight_prefixes(ModelFamily family);

// Every tensor a model of config `c` reads when its weights sit under `prefix`. lm_head.weight is
// included when the head is untied; a tied model reads the embedding instead.
std::vector<ExpectedTensor> expected_tensors(const ModelConfig& c, std::string_view prefix);

// Tensors a checkpoint may hold that the model does not read, because they belong to a part specserve
// does not run: a vision tower ("model.visual.", "visual."), a multi-token-prediction head ("mtp."), a
// stored lm_head of a tied model, rotary inv_freq buffers. Any other tensor left over means the
// checkpoint is not the model the config describes (quantisation scales, adapters, another
// architecture's parts), and loading it would run something else: it is refused.
bool is_known_extra_tensor(const ModelConfig& c, std::string_view name);

// Refuses a config the models do not implement although it parses: a quantised checkpoint
// (ModelConfig::quantization) other than Qwen's fp8 block-128 format on a target model, or a RoPE scaling
// other than plain RoPE (yarn, linear, dynamic, ...). The message is one line naming the method.
void require_implemented(const ModelConfig& c, const Checkpoint& ckpt);

// Finds the prefix, then checks that every expected tensor is present with the implied shape and a
// float dtype (F32, F16, BF16; or, in an fp8 block-128 checkpoint, F8_E4M3 for a Linear weight with its
// scale), and that every other tensor is a known extra. Throws Error naming the first missing or mismatched
// tensor (an fp8 weight without its scale, a scale of the wrong shape or dtype, an fp8 tensor the model
// reads as floats), what require_implemented refuses, a scale of a weight that is not fp8, the unread
// tensors, or a tensor of an unsupported drafter variant (DFlash2 / DSpark, docs/DFLASH.md §1.9). Every
// loader calls it first.
CheckpointLayout resolve_checkpoint_layout(const ModelConfig& c, const Checkpoint& ckpt);

}  // namespace specserve
