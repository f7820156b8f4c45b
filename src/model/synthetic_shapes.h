#pragma once
// Named real model shapes for `specserve bench steps --synthetic SHAPE` (docs/MODELS.md §3, docs/DFLASH.md §1.8): the
// target's config and its z-lab DFlash drafter's, as the checkpoints' config.json would give them.
//   qwen3-8b      Qwen3-8B (36 dense layers, H 4096)        + Qwen3-8B-DFlash-b16 (5 full layers)
//   qwen3.6-27b   Qwen3.6-27B = Qwen3.5-27B (48 DeltaNet + 16 attention layers, H 5120)
//                                                           + Qwen3.6-27B-DFlash (4 sliding + 1 full)
//   tiny          a small hybrid pair (for tests of the benchmark itself)
//   NAME-fp8      (each of the above) the target as Qwen's fp8 release of it, loaded with --fp8-weights keep
//                 (docs/MODELS.md §6.1): its config carries the block-128 fp8 quantization_config, and
//                 TargetModel::synthetic makes the Linear weights e4m3 codes + f32 block scales
//                 (in_proj_a / in_proj_b, the embedding table, lm_head and norms as in the plain shape); the
//                 drafter is the plain shape's (z-lab's drafters are bf16)
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "io/model_config.h"

namespace specserve {

struct SyntheticShape {
  std::string name;
  ModelConfig target;
  ModelConfig drafter;
};

// Throws an Error listing the known names when `name` is none of them ("qwen3.5-27b" is an alias of
// "qwen3.6-27b", "qwen3.5-27b-fp8" of "qwen3.6-27b-fp8").
SyntheticShape synthetic_shape(std::string_view name);
std::vector<std::string> synthetic_shape_names();

// The named shape whose target has `target`'s architecture (layer counts and kinds, widths, heads, vocabulary;
// not its context length or dtype), e.g. a random checkpoint made by tools/gpu/make_random_checkpoint.py, so
// that a benchmark can pair it with its real drafter's shape (`bench serve-load --acceptance` without
// --draft). The plain shape for an fp8 target (the drafter is the same); nullopt when none matches.
std::optional<SyntheticShape> synthetic_shape_for(const ModelConfig& target);

}  // namespace specserve
