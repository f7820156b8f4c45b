#include "tiny_model.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/tensor.h"
#include "io/checkpoint_layout.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "tiny_tokenizer.h"

namespace specserve::tiny {

namespace {

using ojson = nlohmann::ordered_json;

constexpr int kHidden = 128, kLayers = 4, kHeads = 4, kKvHeads = 2, kHeadDim = 64, kIntermediate = 256;
constexpr int kMaxMerges = 300;

// splitmix64: a tiny, fully specified generator, so the bytes do not depend on the standard
// library's distributions (which differ between implementations).
uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Each tensor gets its own stream keyed by (seed, name): its values do not depend on which other
// tensors exist or in which order they are generated.
uint64_t stream_for(uint64_t seed, const std::string& name) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ull;
  return seed ^ h;
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Initial values by tensor role, close to transformers' init but with non-trivial norms so a wrong
// norm convention (w vs 1 + w) shows in the outputs.
float sample(const std::string& name, const Shape& shape, bool zero_centred_norms, uint64_t& state) {
  const float u = static_cast<float>(splitmix64(state) >> 40) * (1.0f / 16777216.0f);  // [0, 1)
  auto uniform = [u](float lo, float hi) { return lo + (hi - lo) * u; };
  if (ends_with(name, "A_log")) return std::log(uniform(1.0f, 16.0f));
  if (ends_with(name, "dt_bias")) return uniform(0.5f, 1.5f);
  if (ends_with(name, "conv1d.weight")) return uniform(-0.5f, 0.5f);
  if (ends_with(name, "linear_attn.norm.weight")) return 1.0f + uniform(-0.1f, 0.1f);  // gated norm: plain
  if (ends_with(name, "norm.weight")) return (zero_centred_norms ? 0.0f : 1.0f) + uniform(-0.1f, 0.1f);
  if (ends_with(name, "embed_tokens.weight")) return uniform(-0.5f, 0.5f);
  const float bound = 1.0f / std::sqrt(static_cast<float>(shape[shape.ndim - 1]));  // nn.Linear default
  return uniform(-bound, bound);
}

ojson base_config(const TinyModelOptions& o, const TinyTokenizer& tok, int64_t vocab_rows) {
  ojson c;
  const bool hybrid = o.family == "qwen3_5";
  c["architectures"] = {hybrid ? "Qwen3_5ForCausalLM" : "Qwen3ForCausalLM"};
  c["model_type"] = hybrid ? "qwen3_5_text" : "qwen3";
  c["vocab_size"] = vocab_rows;
  c["hidden_size"] = kHidden;
  c["intermediate_size"] = kIntermediate;
  c["num_hidden_layers"] = kLayers;
  c["num_attention_heads"] = kHeads;
  c["num_key_value_heads"] = kKvHeads;
  c["head_dim"] = kHeadDim;
  c["hidden_act"] = "silu";
  c["rms_norm_eps"] = 1e-6;
  c["max_position_embeddings"] = 32768;
  c["initializer_range"] = 0.02;
  c["attention_bias"] = false;
  c["attention_dropout"] = 0.0;
  c["tie_word_embeddings"] = true;
  c["use_cache"] = true;
  c["bos_token_id"] = tok.special_id("<|endoftext|>");
  c["eos_token_id"] = tok.special_id(hybrid ? "<|endoftext|>" : "<|im_end|>");
  c["pad_token_id"] = nullptr;
  return c;
}

ojson config_json(const TinyModelOptions& o, const TinyTokenizer& tok, int64_t vocab_rows) {
  ojson c = base_config(o, tok, vocab_rows);
  const char* dtype = o.dtype == DType::BF16 ? "bfloat16" : "float32";
  if (o.family == "qwen3") {  // the transformers v4 spelling, as the released Qwen3 files have it
    c["rope_theta"] = 1000000.0;
    c["rope_scaling"] = nullptr;
    c["use_sliding_window"] = false;
    c["sliding_window"] = nullptr;
    c["max_window_layers"] = kLayers;
    c["torch_dtype"] = dtype;
    return c;
  }
  // Qwen3.5 text config (transformers v5 spelling); rotary 16 of 64 dims → 8 M-RoPE slots.
  c["layer_types"] = {"linear_attention", "linear_attention", "linear_attention", "full_attention"};
  c["full_attention_interval"] = 4;
  c["linear_conv_kernel_dim"] = 4;
  c["linear_key_head_dim"] = 32;
  c["linear_value_head_dim"] = 32;
  c["linear_num_key_heads"] = 2;
  c["linear_num_value_heads"] = 4;
  c["partial_rotary_factor"] = 0.25;
  c["rope_parameters"] = {{"rope_type", "default"},
                          {"rope_theta", 10000000.0},
                          {"partial_rotary_factor", 0.25},
                          {"mrope_section", {3, 3, 2}},
                          {"mrope_interleaved", true}};
  c["attn_output_gate"] = true;
  c["mamba_ssm_dtype"] = "float32";
  c["dtype"] = dtype;
  return c;
}

ojson generation_config_json(const TinyTokenizer& tok) {
  return {{"bos_token_id", tok.special_id("<|endoftext|>")},
          {"eos_token_id", {tok.special_id("<|im_end|>"), tok.special_id("<|endoftext|>")}},
          {"pad_token_id", tok.special_id("<|endoftext|>")},
          {"do_sample", true},
          {"temperature", 0.7},
          {"top_p", 0.8},
          {"top_k", 20}};
}

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out) fail("{}: write failed", path.string());
}

}  // namespace

TinyModelInfo write_tiny_model(const TinyModelOptions& o) {
  SS_CHECK(o.family == "qwen3" || o.family == "qwen3_5", "--family must be qwen3 or qwen3_5, got '{}'", o.family);
  SS_CHECK(o.dtype == DType::BF16 || o.dtype == DType::F32, "--dtype must be bf16 or f32");
  SS_CHECK(!o.out_dir.empty(), "--out is required");
  const std::filesystem::path dir(o.out_dir);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) fail("{}: cannot create directory: {}", o.out_dir, ec.message());

  const TinyTokenizer tok = build_tiny_tokenizer(kMaxMerges);
  TinyModelInfo info;
  info.vocab_rows = (tok.size() + 63) / 64 * 64;
  const std::string config_text = config_json(o, tok, info.vocab_rows).dump(2) + "\n";
  // The tensor list comes from the same code the loader's layout check uses, so the two agree.
  const ModelConfig config = parse_model_config(config_text);
  SafetensorsWriter writer;
  writer.set_metadata("format", "pt");
  for (const ExpectedTensor& t : expected_tensors(config, "model.")) {
    Tensor values = Tensor::empty(DType::F32, t.shape);
    uint64_t state = stream_for(o.seed, t.name);
    for (int64_t i = 0; i < values.numel(); ++i)
      values.as<float>()[i] = sample(t.name, t.shape, config.family == ModelFamily::Qwen3_5, state);
    if (o.dtype == DType::F32)
      writer.add(t.name, values);
    else
      writer.add(t.name, from_f32(values, o.dtype));
    info.parameters += t.shape.numel();
  }
  writer.write((dir / "model.safetensors").string());
  write_text(dir / "config.json", config_text);
  write_text(dir / "generation_config.json", generation_config_json(tok).dump(2) + "\n");
  write_text(dir / "tokenizer.json", tokenizer_json(tok));
  write_text(dir / "tokenizer_config.json", tokenizer_config_json(tok));
  return info;
}

}  // namespace specserve::tiny
