#pragma once
// Named real model shapes for `specserve bench steps --synthetic SHAPE` (docs/MODELS.md §3, docs/DFLASH.md §1.8): the
// target's config and its z-lab DFlash drafter's, as the checkpoints' config.json would give them.
//   qwen3-8b      Qwen3-8B (36 dense layers, H 4096)        + Qwen3-8B-DFlash-b16 (5 full layers)
//   qwen3.6-27b   Qwen3.6-27B = Qwen3.5-27B (48 DeltaNet + 16 attention layers, H 5120)
//                                                           + Qwen3.6-27B-DFlash (4 sliding + 1 full)
//   tiny          a small hybrid pair (for tests of the benchmark itself)
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

// Throws an Error listing the known names when `name` is none of them ("qwen3.5-27b" is an alias).
SyntheticShape synthetic_shape(std::string_view name);
std::vector<std::string> synthetic_shape_names();

}  // namespace specserve
