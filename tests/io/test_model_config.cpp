// config.json parsing: both Qwen3.5 layouts, Qwen3, DFlash drafters, and every error path.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "io/model_config.h"
#include "io_test_util.h"

namespace specserve {
namespace {

using json = nlohmann::json;
using test::expect_error;

// Qwen3-8B as released (transformers v4 spelling: rope_theta, torch_dtype).
json qwen3_8b() {
  return json::parse(R"({
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
    "vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 12288, "num_hidden_layers": 36,
    "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "hidden_act": "silu",
    "max_position_embeddings": 40960, "rms_norm_eps": 1e-06, "rope_theta": 1000000, "rope_scaling": null,
    "tie_word_embeddings": false, "attention_bias": false, "use_sliding_window": false,
    "sliding_window": null, "max_window_layers": 36, "bos_token_id": 151643, "eos_token_id": 151645,
    "torch_dtype": "bfloat16"})");
}

// Qwen3.6-27B's shape: nested text_config, rope_parameters with M-RoPE (transformers v5).
json qwen3_6_27b() {
  json layer_types = json::array();
  for (int i = 0; i < 64; ++i) layer_types.push_back((i + 1) % 4 == 0 ? "full_attention" : "linear_attention");
  json text = {{"model_type", "qwen3_5_text"},
               {"vocab_size", 248320},
               {"hidden_size", 5120},
               {"intermediate_size", 17408},
               {"num_hidden_layers", 64},
               {"num_attention_heads", 24},
               {"num_key_value_heads", 4},
               {"head_dim", 256},
               {"hidden_act", "silu"},
               {"rms_norm_eps", 1e-6},
               {"max_position_embeddings", 262144},
               {"layer_types", layer_types},
               {"full_attention_interval", 4},
               {"linear_conv_kernel_dim", 4},
               {"linear_key_head_dim", 128},
               {"linear_value_head_dim", 128},
               {"linear_num_key_heads", 16},
               {"linear_num_value_heads", 48},
               {"partial_rotary_factor", 0.25},
               {"rope_parameters",
                {{"rope_type", "default"},
                 {"rope_theta", 10000000},
                 {"partial_rotary_factor", 0.25},
                 {"mrope_section", {11, 11, 10}},
                 {"mrope_interleaved", true}}},
               {"attn_output_gate", true},
               {"attention_bias", false},
               {"mtp_num_hidden_layers", 1},
               {"bos_token_id", 248044},
               {"eos_token_id", 248044}};
  return {{"architectures", {"Qwen3_5ForConditionalGeneration"}},
          {"model_type", "qwen3_5"},
          {"text_config", text},
          {"vision_config", {{"depth", 27}}},
          {"image_token_id", 248056},
          {"tie_word_embeddings", false},
          {"dtype", "bfloat16"}};
}

// z-lab Qwen3-8B-DFlash-b16 (docs/DFLASH.md §2.1).
json qwen3_8b_dflash() {
  json j = qwen3_8b();
  j["architectures"] = {"DFlashDraftModel"};
  j["num_hidden_layers"] = 5;
  j["block_size"] = 16;
  j["num_target_layers"] = 36;
  j["dflash_config"] = {{"mask_token_id", 151669}, {"target_layer_ids", {1, 9, 17, 25, 33}}};
  j["layer_types"] =
      json::array({"full_attention", "full_attention", "full_attention", "full_attention", "full_attention"});
  j.erase("torch_dtype");
  j["dtype"] = "bfloat16";
  return j;
}

ModelConfig parse(const json& j) { return parse_model_config(j.dump()); }

void expect_config_error(const json& j, const std::string& needle) {
  expect_error([&] { parse(j); }, needle);
}

TEST(ModelConfig, ParsesQwen3) {
  ModelConfig c = parse(qwen3_8b());
  EXPECT_EQ(c.family, ModelFamily::Qwen3);
  EXPECT_EQ(c.model_type, "qwen3");
  EXPECT_EQ(c.architectures, std::vector<std::string>{"Qwen3ForCausalLM"});
  EXPECT_FALSE(c.nested_text_config);
  EXPECT_EQ(c.vocab_size, 151936);
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.intermediate_size, 12288);
  EXPECT_EQ(c.num_layers, 36);
  EXPECT_EQ(c.num_heads, 32);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_DOUBLE_EQ(c.partial_rotary_factor, 1.0);
  EXPECT_EQ(c.rotary_dim(), 128);
  EXPECT_EQ(c.rope_type, "default");
  EXPECT_EQ(c.max_position_embeddings, 40960);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FALSE(c.attn_output_gate);
  EXPECT_FALSE(c.sliding_window.has_value());
  EXPECT_EQ(c.layer_types, std::vector<LayerType>(36, LayerType::FullAttention));
  EXPECT_EQ(c.num_attention_layers(), 36);
  EXPECT_EQ(c.bos_token_id, 151643);
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{151645});
  EXPECT_EQ(c.dtype, DType::BF16);
  EXPECT_FALSE(c.dflash.has_value());
}

TEST(ModelConfig, AcceptsTransformersV5Spellings) {
  json j = qwen3_8b();
  j.erase("rope_theta");
  j.erase("torch_dtype");
  j["rope_parameters"] = {{"rope_theta", 5000000.0}, {"rope_type", "default"}};
  j["dtype"] = "float32";
  j["eos_token_id"] = {151645, 151643};
  j["tie_word_embeddings"] = true;
  ModelConfig c = parse(j);
  EXPECT_DOUBLE_EQ(c.rope_theta, 5e6);
  EXPECT_EQ(c.dtype, DType::F32);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{151645, 151643}));
  EXPECT_TRUE(c.tie_word_embeddings);
}

TEST(ModelConfig, DerivesSlidingLayersFromMaxWindowLayers) {
  json j = qwen3_8b();
  j["num_hidden_layers"] = 4;
  j["use_sliding_window"] = true;
  j["sliding_window"] = 4096;
  j["max_window_layers"] = 2;
  ModelConfig c = parse(j);
  EXPECT_EQ(c.sliding_window, 4096);
  EXPECT_EQ(c.layer_types, (std::vector<LayerType>{LayerType::FullAttention, LayerType::FullAttention,
                                                   LayerType::SlidingAttention, LayerType::SlidingAttention}));
}

TEST(ModelConfig, ParsesQwen3_5NestedTextConfig) {
  ModelConfig c = parse(qwen3_6_27b());
  EXPECT_EQ(c.family, ModelFamily::Qwen3_5);
  EXPECT_TRUE(c.nested_text_config);
  EXPECT_EQ(c.model_type, "qwen3_5_text");
  EXPECT_EQ(c.hidden_size, 5120);
  EXPECT_EQ(c.num_layers, 64);
  EXPECT_EQ(c.num_attention_layers(), 16);
  EXPECT_EQ(c.num_linear_layers(), 48);
  EXPECT_EQ(c.layer_types[3], LayerType::FullAttention);
  EXPECT_EQ(c.layer_types[4], LayerType::LinearAttention);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e7);
  EXPECT_EQ(c.rotary_dim(), 64);
  EXPECT_EQ(c.rope_type, "default");
  EXPECT_TRUE(c.attn_output_gate);
  EXPECT_EQ(c.linear_conv_kernel_dim, 4);
  EXPECT_EQ(c.linear_key_head_dim, 128);
  EXPECT_EQ(c.linear_value_head_dim, 128);
  EXPECT_EQ(c.linear_num_key_heads, 16);
  EXPECT_EQ(c.linear_num_value_heads, 48);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{248044});
  EXPECT_EQ(c.dtype, DType::BF16);
}

TEST(ModelConfig, ParsesQwen3_5FlatTextConfig) {
  json j = qwen3_6_27b()["text_config"];
  j["architectures"] = {"Qwen3_5ForCausalLM"};
  j["tie_word_embeddings"] = true;
  j["dtype"] = "bfloat16";
  ModelConfig c = parse(j);
  EXPECT_EQ(c.family, ModelFamily::Qwen3_5);
  EXPECT_FALSE(c.nested_text_config);
  EXPECT_EQ(c.num_linear_layers(), 48);
  EXPECT_TRUE(c.tie_word_embeddings);
}

TEST(ModelConfig, Qwen3_5DefaultsScheduleFromFullAttentionInterval) {
  json j = qwen3_6_27b();
  j["text_config"].erase("layer_types");
  j["text_config"]["num_hidden_layers"] = 8;
  j["text_config"].erase("full_attention_interval");
  ModelConfig c = parse(j);  // default interval 4: layers 3 and 7 are attention
  EXPECT_EQ(c.num_attention_layers(), 2);
  EXPECT_EQ(c.layer_types[3], LayerType::FullAttention);
  EXPECT_EQ(c.layer_types[7], LayerType::FullAttention);
  j["text_config"]["full_attention_interval"] = 2;
  c = parse(j);
  EXPECT_EQ(c.num_attention_layers(), 4);
  EXPECT_EQ(c.layer_types[1], LayerType::FullAttention);
  EXPECT_EQ(c.layer_types[2], LayerType::LinearAttention);
}

TEST(ModelConfig, Qwen3_5OlderRopeSpelling) {
  json j = qwen3_6_27b();
  auto& t = j["text_config"];
  t.erase("rope_parameters");
  t["rope_theta"] = 5000000;
  t["rope_scaling"] = {{"type", "mrope"}, {"mrope_section", {11, 11, 10}}};
  ModelConfig c = parse(j);
  EXPECT_DOUBLE_EQ(c.rope_theta, 5e6);
  EXPECT_DOUBLE_EQ(c.partial_rotary_factor, 0.25);  // top-level key
  EXPECT_EQ(c.rope_type, "default");                // M-RoPE is plain RoPE for text
  t.erase("partial_rotary_factor");
  EXPECT_DOUBLE_EQ(parse(j).partial_rotary_factor, 0.25);  // the Qwen3.5 default
  t["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  EXPECT_EQ(parse(j).rope_type, "yarn");  // recorded for the model to refuse
}

TEST(ModelConfig, Qwen3_5TokenIdsAndDtypeFromEitherLevel) {
  json j = qwen3_6_27b();
  j["text_config"].erase("eos_token_id");
  j["eos_token_id"] = {1, 2};
  j.erase("dtype");
  j["text_config"]["torch_dtype"] = "float16";
  j.erase("tie_word_embeddings");
  j["text_config"]["tie_word_embeddings"] = true;
  ModelConfig c = parse(j);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(c.dtype, DType::F16);
  EXPECT_TRUE(c.tie_word_embeddings);
}

TEST(ModelConfig, ParsesDFlashDrafter) {
  ModelConfig c = parse(qwen3_8b_dflash());
  EXPECT_EQ(c.family, ModelFamily::DFlashDrafter);
  EXPECT_EQ(c.num_layers, 5);
  ASSERT_TRUE(c.dflash.has_value());
  EXPECT_EQ(c.dflash->block_size, 16);
  EXPECT_EQ(c.dflash->mask_token_id, 151669);
  EXPECT_EQ(c.dflash->num_target_layers, 36);
  EXPECT_EQ(c.dflash->target_layer_ids, (std::vector<int>{1, 9, 17, 25, 33}));
}

TEST(ModelConfig, DFlashBlockSizePrecedence) {
  json j = qwen3_8b_dflash();
  j["dflash_config"]["block_size"] = 10;
  EXPECT_EQ(parse(j).dflash->block_size, 10);  // dflash_config wins over the top level
  j["dflash_config"].erase("block_size");
  j["block_size"] = 8;
  EXPECT_EQ(parse(j).dflash->block_size, 8);
  j.erase("block_size");
  EXPECT_EQ(parse(j).dflash->block_size, 16);  // the default
  j["block_size"] = 1;
  expect_config_error(j, "key 'block_size' must be at least 2, found 1");
}

TEST(ModelConfig, DFlashDefaultTargetLayerIds) {
  json j = qwen3_8b_dflash();
  j["dflash_config"].erase("target_layer_ids");
  EXPECT_EQ(parse(j).dflash->target_layer_ids, (std::vector<int>{1, 9, 17, 25, 33}));
  j["dflash_config"]["num_target_layers"] = 64;  // dflash_config wins over the top level
  EXPECT_EQ(parse(j).dflash->target_layer_ids, (std::vector<int>{1, 16, 31, 46, 61}));
  j["dflash_config"].erase("num_target_layers");
  j.erase("num_target_layers");
  expect_config_error(j, "missing key 'dflash_config.target_layer_ids' (and no 'num_target_layers'");
}

TEST(ModelConfig, DFlashSlidingWindowDrafter) {
  json j = qwen3_8b_dflash();  // Qwen3.6-27B-DFlash: 4 sliding + 1 full
  j["layer_types"] = {"sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention",
                      "full_attention"};
  j["use_sliding_window"] = true;
  j["sliding_window"] = 2048;
  ModelConfig c = parse(j);
  EXPECT_EQ(c.sliding_window, 2048);
  EXPECT_EQ(c.layer_types[0], LayerType::SlidingAttention);
  EXPECT_EQ(c.layer_types[4], LayerType::FullAttention);
  j["use_sliding_window"] = false;
  expect_config_error(j, "key 'layer_types' lists sliding_attention layers but 'use_sliding_window' is false");
  j.erase("use_sliding_window");
  j["sliding_window"] = nullptr;
  expect_config_error(j, "key 'layer_types' lists sliding_attention layers but 'sliding_window' is missing");
}

TEST(ModelConfig, DFlashErrorsNameTheKey) {
  json j = qwen3_8b_dflash();
  j["dflash_config"].erase("mask_token_id");
  expect_config_error(j, "missing key 'dflash_config.mask_token_id'");
  j = qwen3_8b_dflash();
  j["dflash_config"]["mask_token_id"] = 151936;
  expect_config_error(j, "key 'dflash_config.mask_token_id' (151936) must be in [0, vocab_size 151936)");
  j = qwen3_8b_dflash();
  j["dflash_config"]["target_layer_ids"] = {1, 9, 36};
  expect_config_error(j, "key 'dflash_config.target_layer_ids[2]' (36) is not a layer of the 36-layer target");
  j["dflash_config"]["target_layer_ids"] = {1, -1};
  expect_config_error(j, "key 'dflash_config.target_layer_ids[1]' (-1) must be non-negative");
  j["dflash_config"]["target_layer_ids"] = json::array();
  expect_config_error(j, "key 'dflash_config.target_layer_ids' is empty");
  j["dflash_config"]["target_layer_ids"] = "1,9";
  expect_config_error(j, "key 'dflash_config.target_layer_ids' must be a list of integers, found a string");
  j.erase("dflash_config");
  expect_config_error(j, "missing key 'dflash_config'");
  j = qwen3_8b_dflash();
  j["model_type"] = "llama";
  expect_config_error(j, "architecture 'DFlashDraftModel' expects model_type 'qwen3', found 'llama'");
}

TEST(ModelConfig, DefaultTargetLayerIdsMatchReference) {
  // The examples of docs/DFLASH.md §1.3, computed by the reference build_target_layer_ids.
  EXPECT_EQ(default_target_layer_ids(36, 5), (std::vector<int>{1, 9, 17, 25, 33}));
  EXPECT_EQ(default_target_layer_ids(64, 5), (std::vector<int>{1, 16, 31, 46, 61}));
  EXPECT_EQ(default_target_layer_ids(40, 5), (std::vector<int>{1, 10, 19, 28, 37}));
  EXPECT_EQ(default_target_layer_ids(32, 5), (std::vector<int>{1, 8, 15, 22, 29}));
  EXPECT_EQ(default_target_layer_ids(32, 8), (std::vector<int>{1, 5, 9, 13, 17, 21, 25, 29}));
  EXPECT_EQ(default_target_layer_ids(8, 3), (std::vector<int>{1, 3, 5}));
  EXPECT_EQ(default_target_layer_ids(36, 1), (std::vector<int>{18}));
  // Ties round half to even like Python's round(): 1 + 1·6/4 = 2.5 → 2 and 1 + 3·6/4 = 5.5 → 6.
  EXPECT_EQ(default_target_layer_ids(10, 5), (std::vector<int>{1, 2, 4, 6, 7}));
  // A target shallower than 4 layers: the span is negative, as in the reference.
  EXPECT_EQ(default_target_layer_ids(3, 2), (std::vector<int>{1, 0}));
}

TEST(ModelConfig, DetectsFamilyFromModelTypeWithoutArchitectures) {
  json j = qwen3_8b();
  j.erase("architectures");
  EXPECT_EQ(parse(j).family, ModelFamily::Qwen3);
  j = qwen3_8b_dflash();
  j.erase("architectures");
  EXPECT_EQ(parse(j).family, ModelFamily::DFlashDrafter);
  j = qwen3_6_27b();
  j.erase("architectures");
  EXPECT_TRUE(parse(j).nested_text_config);
  j["model_type"] = "qwen3_5_moe";
  expect_config_error(j, "unsupported model_type 'qwen3_5_moe' (key 'model_type')");
  j.erase("model_type");
  expect_config_error(j, "missing key 'architectures' (and no 'model_type' either)");
}

TEST(ModelConfig, RejectsUnsupportedArchitecture) {
  json j = qwen3_8b();
  j["architectures"] = {"LlamaForCausalLM"};
  expect_config_error(j,
                      "unsupported architecture 'LlamaForCausalLM' (key 'architectures'); supported: Qwen3ForCausalLM");
  j["architectures"] = {"Qwen3ForCausalLM"};
  j["model_type"] = "qwen2";
  expect_config_error(j, "architecture 'Qwen3ForCausalLM' expects model_type 'qwen3', found 'qwen2'");
  j = qwen3_8b();
  j["num_experts"] = 128;
  expect_config_error(j, "key 'num_experts' is 128: mixture-of-experts models are not supported");
  j = qwen3_8b();
  j["hidden_act"] = "gelu";
  expect_config_error(j, "key 'hidden_act' is 'gelu'; only silu is supported");
}

TEST(ModelConfig, MissingKeysAreNamedWithTheirPath) {
  for (const char* key : {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                          "num_key_value_heads", "head_dim"}) {
    json j = qwen3_8b();
    j.erase(key);
    expect_config_error(j, std::string("missing key '") + key + "'");
    j = qwen3_6_27b();
    j["text_config"].erase(key);
    expect_config_error(j, std::string("missing key 'text_config.") + key + "'");
  }
  for (const char* key : {"linear_conv_kernel_dim", "linear_key_head_dim", "linear_value_head_dim",
                          "linear_num_key_heads", "linear_num_value_heads"}) {
    json j = qwen3_6_27b();
    j["text_config"].erase(key);
    expect_config_error(j, std::string("missing key 'text_config.") + key + "'");
  }
  json j = qwen3_6_27b();
  j.erase("text_config");
  expect_config_error(j, "missing key 'text_config'");
  j = qwen3_8b();
  j.erase("rope_theta");
  expect_config_error(j, "missing key 'rope_theta' (or 'rope_parameters.rope_theta')");
  j = qwen3_6_27b();
  j["text_config"].erase("rope_parameters");
  expect_config_error(j, "missing key 'text_config.rope_theta' (or 'text_config.rope_parameters.rope_theta')");
}

TEST(ModelConfig, IllTypedKeysAreNamed) {
  auto with = [](json j, const std::string& key, json value) {
    j[key] = std::move(value);
    return j;
  };
  expect_config_error(with(qwen3_8b(), "hidden_size", "4096"), "key 'hidden_size' must be an integer, found a string");
  expect_config_error(with(qwen3_8b(), "hidden_size", 4096.5), "key 'hidden_size' must be an integer, found a number");
  expect_config_error(with(qwen3_8b(), "hidden_size", 0), "key 'hidden_size' must be a positive integer, found 0");
  expect_config_error(with(qwen3_8b(), "hidden_size", 2147483647),
                      "key 'hidden_size' (2147483647) is larger than 16777216");
  expect_config_error(with(qwen3_8b(), "hidden_size", 4294967296),
                      "key 'hidden_size' must be a positive integer, found 4294967296");
  expect_config_error(with(qwen3_8b(), "num_key_value_heads", 5),
                      "key 'num_attention_heads' (32) must be a multiple of key 'num_key_value_heads' (5)");
  expect_config_error(with(qwen3_8b(), "tie_word_embeddings", "yes"),
                      "key 'tie_word_embeddings' must be true or false, found a string");
  expect_config_error(with(qwen3_8b(), "eos_token_id", "x"),
                      "key 'eos_token_id' must be an integer or a list of integers, found a string");
  expect_config_error(with(qwen3_8b(), "eos_token_id", json::array({1, "2"})),
                      "key 'eos_token_id[1]' must be an integer, found a string");
  expect_config_error(with(qwen3_8b(), "rope_theta", "1e6"), "key 'rope_theta' must be a number, found a string");
  expect_config_error(with(qwen3_8b(), "torch_dtype", "int8"), "key 'torch_dtype' has unsupported value 'int8'");
  expect_config_error(with(qwen3_8b(), "architectures", "Qwen3ForCausalLM"),
                      "key 'architectures' must be a list of strings, found a string");
  expect_config_error(with(qwen3_8b(), "rope_parameters", 3),
                      "key 'rope_parameters' must be an object, found an integer");
  expect_config_error(with(qwen3_8b(), "layer_types", json::array({"full_attention"})),
                      "key 'layer_types' has 1 entries but 'num_hidden_layers' is 36");
  json j = qwen3_8b();
  j["num_hidden_layers"] = 2;
  j["layer_types"] = {"full_attention", "linear_attention"};
  expect_config_error(j, "key 'layer_types[1]' is 'linear_attention', which qwen3 models do not have");
  j = qwen3_6_27b();
  j["text_config"]["layer_types"][5] = "mamba";
  expect_config_error(j, "key 'text_config.layer_types[5]' is 'mamba', which qwen3_5 models do not have");
  j = qwen3_6_27b();
  j["text_config"]["rope_parameters"]["partial_rotary_factor"] = 1.5;
  expect_config_error(j, "key 'text_config.rope_parameters.partial_rotary_factor' must be in (0, 1], found 1.5");
  j = qwen3_6_27b();
  j["text_config"]["linear_num_value_heads"] = 20;
  expect_config_error(
      j,
      "key 'text_config.linear_num_value_heads' (20) must be a multiple of key 'text_config.linear_num_key_heads' (16)");
  j = qwen3_6_27b();
  j["text_config"] = json::array();
  expect_config_error(j, "key 'text_config' must be an object, found an array");
}

TEST(ModelConfig, RejectsMalformedJson) {
  expect_error([] { parse_model_config("{\"architectures\": [\"Qwen3ForCausalLM\""); },
               "config.json is not valid JSON");
  expect_error([] { parse_model_config("[]"); }, "config.json is an array, expected an object");
  expect_error([] { parse_model_config(R"({"model_type":"qwen3","model_type":"llama"})"); },
               "config.json: duplicate key 'model_type'");
}

TEST(ModelConfig, LoadErrorsCarryThePath) {
  test::TempDir dir;
  expect_error([&] { load_model_config(dir.path().string()); }, dir.file("config.json") + ": cannot read");
  test::write_bytes(dir.file("config.json"), "{}");
  expect_error([&] { load_model_config(dir.path().string()); },
               dir.file("config.json") + ": missing key 'architectures'");
}

// Configs written by transformers 5.17 save_pretrained (tests/fixtures/model, made by
// tools/reference/model/make_fixtures.py).
TEST(ModelConfig, ParsesTransformersFixtures) {
  const std::string& fixtures = test::kModelFixtures;
  ModelConfig vl = load_model_config(fixtures + "qwen3_5_vl");
  EXPECT_EQ(vl.family, ModelFamily::Qwen3_5);
  EXPECT_TRUE(vl.nested_text_config);
  EXPECT_EQ(vl.hidden_size, 48);
  EXPECT_EQ(vl.num_linear_layers(), 3);
  EXPECT_EQ(vl.rotary_dim(), 8);
  EXPECT_EQ(vl.dtype, DType::F32);
  EXPECT_FALSE(vl.tie_word_embeddings);
  ModelConfig flat = load_model_config(fixtures + "qwen3_5_flat");
  EXPECT_FALSE(flat.nested_text_config);
  EXPECT_TRUE(flat.tie_word_embeddings);
  EXPECT_EQ(flat.linear_num_value_heads, 4);
  ModelConfig tied = load_model_config(fixtures + "qwen3_tied");
  EXPECT_EQ(tied.family, ModelFamily::Qwen3);
  EXPECT_DOUBLE_EQ(tied.rope_theta, 1e6);
  EXPECT_EQ(tied.num_layers, 3);
  EXPECT_TRUE(tied.tie_word_embeddings);
  EXPECT_FALSE(load_model_config(fixtures + "qwen3_untied").tie_word_embeddings);
}

}  // namespace
}  // namespace specserve
