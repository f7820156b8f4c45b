// The layout check of Qwen's block-128 fp8 checkpoints (docs/MODELS.md §6): Linear weights in F8_E4M3 with
// a weight_scale_inv of any scale dtype, the rest kept in bf16, single file or shards, dense and hybrid;
// and a clear one-line refusal for each way such a checkpoint can be wrong — a weight without its scale, a
// scale of the wrong shape or dtype, an fp8 tensor the model reads as floats, a scale of a float weight, an
// fp8 config with a key the loader does not implement, an fp8 drafter.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>

#include "checkpoint_builder.h"
#include "io/checkpoint_layout.h"
#include "io/fp8_blocks.h"
#include "io/model_summary.h"
#include "checkpoint_layout_of.h"

namespace specserve {
namespace {

using test::expect_error;
using test::TempDir;
using test::tiny_dflash_config;
using test::tiny_qwen3_5_config;
using test::write_bytes;

// Qwen/Qwen3-8B-FP8's quantization_config.
const nlohmann::json kQwenFp8Config = {
    {"quant_method", "fp8"}, {"fmt", "e4m3"}, {"activation_scheme", "dynamic"}, {"weight_block_size", {128, 128}}};

// What transformers' FineGrainedFP8Config writes.
const nlohmann::json kTransformersFp8Config = {{"quant_method", "fp8"},
                                               {"activation_scheme", "dynamic"},
                                               {"weight_block_size", {128, 128}},
                                               {"modules_to_not_convert", {"lm_head"}},
                                               {"modules_to_convert", nullptr},  // transformers 5.17
                                               {"dequantize", false},
                                               {"scale_fmt", "float"}};

// A tiny Qwen3 dense config with dimensions past one block (hidden 160, intermediate 272: ragged blocks).
std::string tiny_qwen3_config() {
  return R"({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 300,
    "hidden_size": 160, "intermediate_size": 272, "num_hidden_layers": 2, "num_attention_heads": 2,
    "num_key_value_heads": 1, "head_dim": 80, "rope_theta": 1000000, "tie_word_embeddings": false,
    "eos_token_id": 1})";
}

std::string with_quantization(const std::string& config_json, const nlohmann::json& q) {
  nlohmann::json j = nlohmann::json::parse(config_json);
  (j.contains("text_config") ? j["text_config"] : j)["quantization_config"] = q;
  return j.dump();
}

struct Stored {
  std::string name;
  DType dtype;
  Shape shape;
};

bool kept_in_bf16(const ExpectedTensor& t) {
  return !t.linear || t.name == "lm_head.weight" || t.name.find("in_proj_a") != std::string::npos ||
         t.name.find("in_proj_b") != std::string::npos;
}

// The tensors of an fp8 checkpoint of `config_json`: Linear weights F8_E4M3 with `scale_dtype` scales;
// embeddings, norms, lm_head and DeltaNet's a/b projections, conv, A_log, dt_bias and norm in bf16.
std::vector<Stored> fp8_tensors(const std::string& config_json, const std::string& prefix, DType scale_dtype) {
  std::vector<Stored> out;
  for (const auto& t : expected_tensors(parse_model_config(config_json), prefix)) {
    if (kept_in_bf16(t)) {
      out.push_back({t.name, DType::BF16, t.shape});
      continue;
    }
    out.push_back({t.name, DType::F8_E4M3, t.shape});
    out.push_back({fp8_scale_name(t.name), scale_dtype, fp8_scale_shape(t.shape)});
  }
  return out;
}

void write(const std::string& dir, const std::string& config_json, const std::vector<Stored>& tensors,
           uint64_t shard_bytes = 0) {
  write_bytes(dir + "/config.json", config_json);
  SafetensorsWriter w;
  for (const auto& t : tensors) w.add(t.name, Tensor::zeros(t.dtype, t.shape));
  if (shard_bytes)
    w.write_sharded(dir, shard_bytes);
  else
    w.write(dir + "/model.safetensors");
}

Stored& find(std::vector<Stored>& v, const std::string& name) {
  auto it = std::find_if(v.begin(), v.end(), [&](const Stored& t) { return t.name == name; });
  if (it == v.end()) throw std::runtime_error("no tensor " + name);
  return *it;
}

TEST(Fp8CheckpointLayout, ConfigsOfTheFormatParse) {
  for (const auto& q : {kQwenFp8Config, kTransformersFp8Config}) {
    const ModelConfig c = parse_model_config(with_quantization(tiny_qwen3_config(), q));
    EXPECT_EQ(c.quantization, "fp8");
    EXPECT_TRUE(c.fp8_block128) << c.quantization_unimplemented;
  }
  nlohmann::json ue8m0 = kTransformersFp8Config;
  ue8m0["scale_fmt"] = "ue8m0";  // power-of-two scales: still the multiplier
  ue8m0["modules_to_not_convert"] = nullptr;
  EXPECT_TRUE(parse_model_config(with_quantization(tiny_qwen3_config(), ue8m0)).fp8_block128);
  EXPECT_TRUE(parse_model_config(with_quantization(tiny_qwen3_5_config(true, false), kQwenFp8Config)).fp8_block128);
  EXPECT_FALSE(parse_model_config(tiny_qwen3_config()).fp8_block128);
}

TEST(Fp8CheckpointLayout, DenseAndHybridLoadWithEveryScaleDtype) {
  TempDir dir;
  for (DType scale_dtype : {DType::F32, DType::F16, DType::BF16}) {
    const std::string cfg = with_quantization(tiny_qwen3_config(), kQwenFp8Config);
    write(dir.path().string(), cfg, fp8_tensors(cfg, "model.", scale_dtype));
    CheckpointLayout l = layout_of(dir.path().string());
    EXPECT_EQ(l.fp8_weights.size(), 2u * 7);  // q k v o gate up down per layer; lm_head stays bf16
    EXPECT_TRUE(std::find(l.fp8_weights.begin(), l.fp8_weights.end(), "model.layers.1.mlp.down_proj.weight") !=
                l.fp8_weights.end());
    EXPECT_TRUE(l.unused.empty());

    // Hybrid, vision-language layout: DeltaNet's in_proj_qkv / z / out_proj quantised, a / b / conv1d / A_log /
    // dt_bias / norm kept in bf16.
    const std::string hybrid = with_quantization(tiny_qwen3_5_config(true, false), kTransformersFp8Config);
    write(dir.path().string(), hybrid, fp8_tensors(hybrid, "model.language_model.", scale_dtype));
    l = layout_of(dir.path().string());
    EXPECT_EQ(l.fp8_weights.size(), 3u * 6 + 7);  // 3 DeltaNet layers × 6, the attention layer 7
    for (const auto& name : l.fp8_weights) {
      EXPECT_EQ(name.find("in_proj_a"), std::string::npos);
      EXPECT_EQ(name.find("in_proj_b"), std::string::npos);
    }
  }
}

TEST(Fp8CheckpointLayout, ShardsAndMixedModulesLoad) {
  TempDir dir;
  const std::string cfg = with_quantization(tiny_qwen3_config(), kQwenFp8Config);
  std::vector<Stored> t = fp8_tensors(cfg, "model.", DType::BF16);
  // A checkpoint may keep any Linear in bf16 (modules_to_not_convert), or quantise lm_head and DeltaNet's
  // a/b projections: each tensor's dtype decides.
  std::erase_if(t, [](const Stored& s) { return s.name == "model.layers.0.self_attn.o_proj.weight_scale_inv"; });
  find(t, "model.layers.0.self_attn.o_proj.weight").dtype = DType::BF16;
  find(t, "lm_head.weight").dtype = DType::F8_E4M3;
  t.push_back({"lm_head.weight_scale_inv", DType::F32, Shape({3, 2})});
  write(dir.path().string(), cfg, t, /*shard_bytes=*/40'000);
  ASSERT_TRUE(std::filesystem::exists(dir.file("model.safetensors.index.json")));
  const CheckpointLayout l = layout_of(dir.path().string());
  EXPECT_EQ(l.fp8_weights.size(), 2u * 7);
  EXPECT_TRUE(std::find(l.fp8_weights.begin(), l.fp8_weights.end(), "lm_head.weight") != l.fp8_weights.end());

  // specserve info's quantised share.
  const ModelSummary s = summarize_model(dir.path().string());
  EXPECT_EQ(s.fp8_weights, 14u);
  uint64_t bytes = 0;
  const auto ckpt = Checkpoint::open(dir.path().string(), MapAdvice::Normal);
  for (const auto& name : l.fp8_weights)
    bytes += ckpt->entry(name).nbytes() + ckpt->entry(fp8_scale_name(name)).nbytes();
  EXPECT_EQ(s.fp8_bytes, bytes);
  EXPECT_EQ(s.model_parameters, s.total_parameters);  // the scales are read too
  EXPECT_NE(format_summary_text(s).find("fp8 block-128: 14 tensors, "), std::string::npos) << format_summary_text(s);
  EXPECT_NE(format_summary_json(s).find("\"fp8_block128\""), std::string::npos);
}

// Writes the fp8 checkpoint after `edit` and checks the refusal names the problem.
void refused(const std::string& config_json, const std::function<void(std::vector<Stored>&)>& edit,
             const std::string& needle, const std::string& prefix = "model.") {
  TempDir dir;
  std::vector<Stored> t = fp8_tensors(config_json, prefix, DType::F32);
  edit(t);
  write(dir.path().string(), config_json, t);
  expect_error([&] { layout_of(dir.path().string()); }, needle);
}

TEST(Fp8CheckpointLayout, MalformedTensorsAreRefused) {
  const std::string cfg = with_quantization(tiny_qwen3_config(), kQwenFp8Config);
  const std::string up = "model.layers.1.mlp.up_proj.weight";
  refused(
      cfg, [&](auto& t) { std::erase_if(t, [&](const Stored& s) { return s.name == up + "_scale_inv"; }); },
      "fp8 weight 'model.layers.1.mlp.up_proj.weight' has no scale tensor "
      "'model.layers.1.mlp.up_proj.weight_scale_inv' [3, 2]");
  refused(
      cfg,
      [&](auto& t) {
        find(t, up + "_scale_inv").shape = Shape({2, 3});
      },
      "scale tensor 'model.layers.1.mlp.up_proj.weight_scale_inv' has shape [2, 3]; the 128×128 blocks of "
      "'model.layers.1.mlp.up_proj.weight' [272, 160] need [3, 2]");
  refused(
      cfg, [&](auto& t) { find(t, up + "_scale_inv").shape = Shape({6}); }, "has shape [6]");
  refused(
      cfg, [&](auto& t) { find(t, up + "_scale_inv").dtype = DType::F8_E4M3; },
      "scale tensor 'model.layers.1.mlp.up_proj.weight_scale_inv' has dtype F8_E4M3; scales must be F32, F16 or "
      "BF16");
  refused(
      cfg, [&](auto& t) { find(t, up + "_scale_inv").dtype = DType::I32; }, "has dtype I32; scales must be");
  // fp8 where the model reads floats: a norm, the embedding (not a Linear), a tied head.
  refused(
      cfg, [&](auto& t) { find(t, "model.layers.0.input_layernorm.weight").dtype = DType::F8_E4M3; },
      "tensor 'model.layers.0.input_layernorm.weight' has dtype F8_E4M3; the model reads it as F32, F16 or BF16 "
      "(fp8 checkpoints quantise only Linear weights)");
  refused(
      cfg,
      [&](auto& t) {
        find(t, "model.embed_tokens.weight").dtype = DType::F8_E4M3;
        t.push_back({"model.embed_tokens.weight_scale_inv", DType::F32, Shape({3, 2})});
      },
      "tensor 'model.embed_tokens.weight' has dtype F8_E4M3; the model reads it as F32, F16 or BF16");
  // A scale beside a bf16 weight would be dropped silently: named.
  refused(
      cfg,
      [&](auto& t) {
        t.push_back({"lm_head.weight_scale_inv", DType::F32, Shape({3, 2})});
      },
      "tensor 'lm_head.weight_scale_inv' scales 'lm_head.weight', which is stored as BF16, not F8_E4M3");
  // Another fp8 element type.
  refused(
      cfg, [&](auto& t) { find(t, up).dtype = DType::F8_E5M2; },
      "tensor 'model.layers.1.mlp.up_proj.weight' has dtype F8_E5M2; weights must be F32, F16 or BF16");
}

TEST(Fp8CheckpointLayout, HybridTensorsKeptInFloatsAreChecked) {
  const std::string cfg = with_quantization(tiny_qwen3_5_config(false, true), kQwenFp8Config);
  for (const std::string name : {"conv1d.weight", "A_log", "dt_bias", "norm.weight"})
    refused(
        cfg, [&](auto& t) { find(t, "model.layers.0.linear_attn." + name).dtype = DType::F8_E4M3; },
        "tensor 'model.layers.0.linear_attn." + name + "' has dtype F8_E4M3; the model reads it as F32");
  // in_proj_a / in_proj_b are Linears: quantised with a scale they load, without one they are refused.
  refused(
      cfg, [&](auto& t) { find(t, "model.layers.2.linear_attn.in_proj_b.weight").dtype = DType::F8_E4M3; },
      "fp8 weight 'model.layers.2.linear_attn.in_proj_b.weight' has no scale tensor");
}

TEST(Fp8CheckpointLayout, UnimplementedFp8ConfigsAreRefusedNamingTheKey) {
  TempDir dir;
  const std::string base = tiny_qwen3_config();
  write(dir.path().string(), base, fp8_tensors(with_quantization(base, kQwenFp8Config), "model.", DType::F32));
  const auto refused_with = [&](const std::string& key, const nlohmann::json& value, const std::string& needle) {
    nlohmann::json q = kQwenFp8Config;
    if (value.is_discarded())
      q.erase(key);
    else
      q[key] = value;
    write_bytes(dir.file("config.json"), with_quantization(base, q));
    expect_error([&] { layout_of(dir.path().string()); }, needle);
  };
  const nlohmann::json absent(nlohmann::json::value_t::discarded);
  refused_with("weight_block_size", {64, 64},
               "quantization 'fp8' with quantization_config.weight_block_size [64, 64] is not implemented: specserve "
               "loads fp8 checkpoints of e4m3 weights with one scale per 128×128 block and dynamic activations");
  refused_with("weight_block_size", {128}, "quantization_config.weight_block_size [128] is not implemented");
  refused_with("weight_block_size", nullptr, "quantization_config.weight_block_size null is not implemented");
  refused_with("weight_block_size", absent, "quantization_config.weight_block_size absent");
  refused_with("fmt", "e5m2", "quantization_config.fmt 'e5m2' is not implemented");
  refused_with("activation_scheme", "static", "quantization_config.activation_scheme 'static' is not implemented");
  refused_with("scale_fmt", "e8m0x", "quantization_config.scale_fmt 'e8m0x' is not implemented");
  refused_with("kv_cache_scheme", {{"dynamic", false}},
               "quantization 'fp8' with key 'quantization_config.kv_cache_scheme' is not implemented");
  // Ill-typed values of known keys are errors naming the key.
  refused_with("weight_block_size", "128", "key 'quantization_config.weight_block_size' must be a list of integers");
  refused_with("modules_to_not_convert", 3, "key 'quantization_config.modules_to_not_convert' must be a list");
  refused_with("modules_to_convert", "all", "key 'quantization_config.modules_to_convert' must be a list");
}

TEST(Fp8CheckpointLayout, Fp8DrafterListsItsQuantisedLinearWeights) {
  TempDir dir;
  const std::string cfg = with_quantization(tiny_dflash_config(), kQwenFp8Config);
  write(dir.path().string(), cfg, fp8_tensors(cfg, "", DType::F32));
  const CheckpointLayout l = layout_of(dir.path().string());
  EXPECT_EQ(l.fp8_weights.size(), 1u + 2u * 7);  // fc, then q k v o gate up down per layer
  for (const char* name : {"fc.weight", "layers.0.self_attn.q_proj.weight", "layers.1.mlp.down_proj.weight"})
    EXPECT_TRUE(std::find(l.fp8_weights.begin(), l.fp8_weights.end(), name) != l.fp8_weights.end()) << name;
  // Its norms are read as floats: an fp8 one is refused by name.
  std::vector<Stored> tensors = fp8_tensors(cfg, "", DType::F32);
  for (auto& t : tensors)
    if (t.name == "hidden_norm.weight") t.dtype = DType::F8_E4M3;
  write(dir.path().string(), cfg, tensors);
  expect_error([&] { layout_of(dir.path().string()); },
               "tensor 'hidden_norm.weight' has dtype F8_E4M3; the model reads it as F32, F16 or BF16");
}

}  // namespace
}  // namespace specserve
