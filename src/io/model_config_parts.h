#pragma once
// Pieces of the config.json parser that live in their own files. Internal to src/io.
#include "io/json_keys.h"
#include "io/model_config.h"

namespace specserve {

// The DFlash part of a drafter config (docs/DFLASH.md §2.1): dflash_config.{mask_token_id,
// target_layer_ids}, block_size (dflash_config, then top level, then 16) and num_target_layers.
// `c` holds the already parsed text-model keys (vocab size, drafter layer count).
DFlashConfig parse_dflash_config(const JsonKeys& root, const ModelConfig& c);

// The quantisation a config declares (quantization_config at the top level or in text_config,
// compression_config): sets c.quantization, c.fp8_block128 and c.quantization_unimplemented.
void parse_quantization(const JsonKeys& root, const JsonKeys& text, ModelConfig& c);

}  // namespace specserve
