#pragma once
// A tiny random checkpoint in the real Hugging Face layout: the default model until the trained demo
// model lands. Qwen3.5-hybrid shaped by default (H 128, layers [linear, linear, linear, full],
// head_dim 64 with partial RoPE 0.25, Gated DeltaNet dk = dv = 32 with 2 key / 4 value heads, I 256),
// text-only flat layout (model.*), tied embeddings, with tokenizer and generation files. The same
// seed gives the same bytes.
#include <cstdint>
#include <string>

#include "core/dtype.h"

namespace specserve::tiny {

struct TinyModelOptions {
  std::string out_dir;
  uint64_t seed = 0;
  std::string family = "qwen3_5";  // "qwen3_5" (Qwen3_5ForCausalLM) or "qwen3" (Qwen3ForCausalLM)
  DType dtype = DType::BF16;       // BF16 or F32
};

struct TinyModelInfo {
  int64_t parameters = 0;
  int64_t vocab_rows = 0;  // the tokenizer's size rounded up to 64
};

// Writes config.json, generation_config.json, tokenizer.json, tokenizer_config.json and
// model.safetensors into options.out_dir (created if needed). Throws Error on bad options or I/O.
TinyModelInfo write_tiny_model(const TinyModelOptions& options);

}  // namespace specserve::tiny
