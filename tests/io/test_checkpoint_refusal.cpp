// A checkpoint the loader does not fully understand is refused, never run: quantised checkpoints
// (every declared scheme but Qwen's block-128 FP8, and FP8 configs outside it), RoPE scaling,
// fp8 weights without a declaration, and tensors the architecture does not read. Known extras (vision tower, MTP
// head, a tied model's stored lm_head, rotary buffers) still load.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>

#include "checkpoint_builder.h"
#include "io/checkpoint_layout.h"
#include "checkpoint_layout_of.h"

namespace specserve {
namespace {

using test::expect_error;
using test::TempDir;
using test::tiny_dflash_config;
using test::tiny_qwen3_5_config;
using test::write_bytes;
using test::write_checkpoint;

// The quantization_config transformers' FineGrainedFP8Config writes (Qwen/Qwen3-8B-FP8 has the same keys).
const nlohmann::json kFp8Config = {{"quant_method", "fp8"},
                                   {"fmt", "e4m3"},
                                   {"activation_scheme", "dynamic"},
                                   {"weight_block_size", {128, 128}},
                                   {"modules_to_not_convert", {"lm_head"}}};

std::string with_key(const std::string& config_json, const std::string& key, const nlohmann::json& value) {
  nlohmann::json j = nlohmann::json::parse(config_json);
  j[key] = value;
  return j.dump();
}

int64_t blocks_of_128(int64_t n) { return (n + 127) / 128; }

// The FP8 layout: every projection of a decoder layer stored as F8_E4M3 with an f32 weight_scale_inv of
// one value per 128×128 block; DeltaNet's small a/b projections, norms and embeddings stay bf16.
void quantize_projections(std::vector<ExpectedTensor>& tensors, std::vector<ExpectedTensor>& scales) {
  for (const auto& t : tensors) {
    const bool projection = t.name.find("_proj") != std::string::npos && t.shape.ndim == 2 &&
                            t.name.find("in_proj_a") == std::string::npos &&
                            t.name.find("in_proj_b") == std::string::npos;
    if (!projection) continue;
    const std::string scale = t.name.substr(0, t.name.size() - std::string("weight").size()) + "weight_scale_inv";
    scales.push_back({scale, Shape({blocks_of_128(t.shape[0]), blocks_of_128(t.shape[1])}), ""});
  }
}

// Writes a tiny Qwen3.5 checkpoint in the FP8 layout; `config_json` is written as its config.json.
void write_fp8_checkpoint(const std::string& dir, const std::string& config_json) {
  const ModelConfig c = parse_model_config(tiny_qwen3_5_config(false, true));
  std::vector<ExpectedTensor> tensors = expected_tensors(c, "model."), scales;
  quantize_projections(tensors, scales);
  SafetensorsWriter w;
  for (const auto& t : tensors) {
    const bool fp8 = std::any_of(scales.begin(), scales.end(),
                                 [&](const ExpectedTensor& s) { return s.name.rfind(t.name, 0) == 0; });
    w.add(t.name, Tensor::zeros(fp8 ? DType::F8_E4M3 : DType::BF16, t.shape));
  }
  for (const auto& s : scales) w.add(s.name, Tensor::zeros(DType::F32, s.shape));
  w.write(dir + "/model.safetensors");
  write_bytes(dir + "/config.json", config_json);
}

TEST(CheckpointRefusal, Fp8CheckpointOutsideTheBlock128FormatNamesTheKey) {
  // The block-128 format loads (tests/io/test_fp8_checkpoint_layout.cpp); another block size is refused.
  TempDir dir;
  nlohmann::json q = kFp8Config;
  q["weight_block_size"] = {64, 64};
  write_fp8_checkpoint(dir.path().string(), with_key(tiny_qwen3_5_config(false, true), "quantization_config", q));
  EXPECT_EQ(load_model_config(dir.path().string()).quantization, "fp8");
  expect_error([&] { layout_of(dir.path().string()); },
               "quantization 'fp8' with quantization_config.weight_block_size [64, 64] is not implemented");
}

TEST(CheckpointRefusal, Fp8TensorsWithoutTheirConfigAreNamed) {
  // Someone deleted quantization_config: the fp8 weights themselves are refused, before the scales.
  TempDir dir;
  write_fp8_checkpoint(dir.path().string(), tiny_qwen3_5_config(false, true));
  expect_error([&] { layout_of(dir.path().string()); },
               "has dtype F8_E4M3; weights must be F32, F16 or BF16 (fp8 weights need a quantization_config)");
}

TEST(CheckpointRefusal, UnreadTensorsAreNamedWithTheirCount) {
  TempDir dir;
  write_checkpoint(dir.path().string(), tiny_qwen3_5_config(false, true), "model.", [](auto& t) {
    t.push_back({"model.layers.0.mlp.down_proj.input_scale", Shape({1}), ""});
    t.push_back({"model.layers.0.mlp.gate_proj.weight_packed", Shape({1, 1}), ""});
    t.push_back({"model.layers.0.mlp.up_proj.lora_A.weight", Shape({2, 16}), ""});
    t.push_back({"model.layers.1.mlp.down_proj.weight_zero_point", Shape({1, 1}), ""});
  });
  expect_error([&] { layout_of(dir.path().string()); },
               "4 tensors the qwen3_5 architecture does not read, so this is not the model config.json describes: "
               "'model.layers.0.mlp.down_proj.input_scale', 'model.layers.0.mlp.gate_proj.weight_packed', "
               "'model.layers.0.mlp.up_proj.lora_A.weight' and 1 more");
  // A block scale beside a bf16 weight (no quantization_config) is named as such.
  write_checkpoint(dir.path().string(), tiny_qwen3_5_config(false, true), "model.", [](auto& t) {
    t.push_back({"model.layers.0.mlp.down_proj.weight_scale_inv", Shape({1, 1}), ""});
  });
  expect_error([&] { layout_of(dir.path().string()); },
               "tensor 'model.layers.0.mlp.down_proj.weight_scale_inv' scales 'model.layers.0.mlp.down_proj.weight', "
               "which is stored as BF16, not F8_E4M3");
}

TEST(CheckpointRefusal, EveryDeclaredSchemeIsRefused) {
  TempDir dir;
  const std::string base = tiny_qwen3_5_config(false, true);
  write_checkpoint(dir.path().string(), base, "model.");
  const auto refused_as = [&](const std::string& config_json, const std::string& method) {
    write_bytes(dir.file("config.json"), config_json);
    expect_error([&] { layout_of(dir.path().string()); }, "quantization '" + method + "' is not implemented");
  };
  refused_as(with_key(base, "quantization_config", {{"quant_method", "awq"}, {"bits", 4}}), "awq");
  refused_as(with_key(base, "quantization_config", {{"bits", 4}}), "unknown");
  refused_as(with_key(base, "compression_config", {{"format", "float-quantized"}}), "compressed-tensors");
  nlohmann::json nested = nlohmann::json::parse(tiny_qwen3_5_config(true, true));
  nested["text_config"]["quantization_config"] = {{"quant_method", "gptq"}, {"bits", 4}};
  write_checkpoint(dir.path().string(), tiny_qwen3_5_config(true, true), "model.language_model.");
  refused_as(nested.dump(), "gptq");
  // An AutoGPTQ / AutoAWQ export keeps its scheme in a file of its own.
  write_bytes(dir.file("config.json"), base);
  write_checkpoint(dir.path().string(), base, "model.");
  write_bytes(dir.file("quantize_config.json"), R"({"bits": 4, "group_size": 128})");
  expect_error([&] { layout_of(dir.path().string()); }, "quantization 'gptq/awq (quantize_config.json)'");
}

TEST(CheckpointRefusal, RopeScalingIsRefused) {
  // Qwen3's documented YaRN extension: parsed, recorded, and refused rather than run as plain RoPE.
  TempDir dir;
  nlohmann::json j = nlohmann::json::parse(tiny_qwen3_5_config(false, true));
  j["rope_parameters"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"rope_theta", 10000000}};
  write_checkpoint(dir.path().string(), tiny_qwen3_5_config(false, true), "model.");
  write_bytes(dir.file("config.json"), j.dump());
  expect_error([&] { layout_of(dir.path().string()); }, "rope type 'yarn' is not implemented (only plain RoPE)");
}

TEST(CheckpointRefusal, KnownExtrasStillLoad) {
  TempDir dir;
  write_checkpoint(dir.path().string(), tiny_qwen3_5_config(false, true), "model.", [](auto& t) {
    t.push_back({"mtp.fc.weight", Shape({16, 32}), ""});
    t.push_back({"model.visual.blocks.0.attn.qkv.weight", Shape({4, 4}), ""});
    t.push_back({"model.layers.3.self_attn.rotary_emb.inv_freq", Shape({2}), ""});
    t.push_back({"lm_head.weight", Shape({64, 16}), ""});
  });
  CheckpointLayout l = layout_of(dir.path().string());
  EXPECT_EQ(l.unused.size(), 4u);
}

TEST(CheckpointRefusal, DrafterWithUnreadTensorsOrQuantizationIsRefused) {
  TempDir dir;
  // A drafter reads its target's embedding and head: its own copies are not known extras.
  write_checkpoint(dir.path().string(), tiny_dflash_config(), "", [](auto& t) {
    t.push_back({"lm_head.weight", Shape({64, 16}), ""});
  });
  expect_error([&] { layout_of(dir.path().string()); },
               "1 tensor the dflash architecture does not read, so this is not the model config.json describes: "
               "'lm_head.weight'");
  write_checkpoint(dir.path().string(),
                   with_key(tiny_dflash_config(), "quantization_config", {{"quant_method", "gptq"}, {"bits", 4}}), "");
  expect_error([&] { layout_of(dir.path().string()); }, "quantization 'gptq' is not implemented");
}

}  // namespace
}  // namespace specserve
