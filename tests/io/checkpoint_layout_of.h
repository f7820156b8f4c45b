#pragma once
// The layout the loader resolves for a checkpoint directory (its config.json and safetensors files).
#include <string>

#include "io/checkpoint_layout.h"
#include "io/model_config.h"
#include "io/safetensors.h"

namespace specserve {
inline CheckpointLayout layout_of(const std::string& dir) {
  return resolve_checkpoint_layout(load_model_config(dir), *Checkpoint::open(dir, MapAdvice::Normal));
}
}  // namespace specserve
