// `specserve info`'s content: layer schedules, parameter counts, and the text / JSON renderings.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "checkpoint_builder.h"
#include "io/model_summary.h"

namespace specserve {
namespace {

using test::TempDir;

using test::kModelFixtures;

std::vector<LayerType> hybrid(int layers) {
  std::vector<LayerType> t;
  for (int i = 0; i < layers; ++i)
    t.push_back((i + 1) % 4 == 0 ? LayerType::FullAttention : LayerType::LinearAttention);
  return t;
}

TEST(ModelSummary, LayerSchedulePatterns) {
  using L = LayerType;
  EXPECT_EQ(layer_schedule(hybrid(64)), "(linear×3, full)×16");
  EXPECT_EQ(layer_schedule(hybrid(4)), "linear×3, full");
  EXPECT_EQ(layer_schedule(std::vector<L>(36, L::FullAttention)), "full×36");
  EXPECT_EQ(layer_schedule({L::FullAttention}), "full");
  EXPECT_EQ(layer_schedule(
                {L::SlidingAttention, L::SlidingAttention, L::SlidingAttention, L::SlidingAttention, L::FullAttention}),
            "sliding×4, full");
  EXPECT_EQ(layer_schedule({L::FullAttention, L::LinearAttention, L::FullAttention, L::LinearAttention}),
            "(full, linear)×2");
  EXPECT_EQ(layer_schedule({}), "");
}

TEST(ModelSummary, GroupsUnusedTensorNames) {
  auto g = group_tensor_names({"model.visual.blocks.0.attn.qkv.weight", "model.visual.merger.norm.weight",
                               "mtp.fc.weight", "mtp.layers.0.input_layernorm.weight", "lm_head.weight"});
  EXPECT_EQ(g, (std::map<std::string, size_t>{{"model.visual", 2}, {"mtp", 2}, {"lm_head", 1}}));
}

TEST(ModelSummary, DescribesVisionLanguageCheckpoint) {
  ModelSummary s = summarize_model(kModelFixtures + "qwen3_5_vl");
  EXPECT_EQ(s.layout.prefix, "model.language_model.");
  ASSERT_EQ(s.parameters_by_dtype.size(), 1u);
  EXPECT_EQ(s.parameters_by_dtype.at(DType::F32), s.total_parameters);
  EXPECT_LT(s.model_parameters, s.total_parameters);  // the vision tower and MTP are not read
  EXPECT_EQ(s.num_files, 1u);
  const std::string text = format_summary_text(s);
  EXPECT_NE(
      text.find(
          "Qwen3_5ForConditionalGeneration (model_type qwen3_5_text, family qwen3_5, text_config in config.json)"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("layers:       4: linear×3, full (1 full_attention, 3 linear_attention)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("head:         untied (lm_head.weight)"), std::string::npos) << text;
  EXPECT_NE(text.find("language_model layout (prefix 'model.language_model.')"), std::string::npos) << text;
  EXPECT_NE(text.find("unused:       model.visual.* ("), std::string::npos) << text;
  EXPECT_NE(text.find("mtp.* (1)"), std::string::npos) << text;
  EXPECT_NE(text.find(", of which the model reads "), std::string::npos) << text;
  EXPECT_NE(text.find("deltanet:     2 key heads × 16, 4 value heads × 16, conv kernel 4"), std::string::npos) << text;

  auto j = nlohmann::json::parse(format_summary_json(s));
  EXPECT_EQ(j["family"], "qwen3_5");
  EXPECT_EQ(j["weight_layout"], "language_model");
  EXPECT_EQ(j["layer_schedule"], "linear×3, full");
  EXPECT_EQ(j["layer_counts"]["linear_attention"], 3);
  EXPECT_EQ(j["tie_word_embeddings"], false);
  EXPECT_EQ(j["parameters"]["F32"], s.total_parameters);
  EXPECT_EQ(j["unused_tensors"]["mtp"], 1);
  EXPECT_FALSE(j.contains("dflash"));
}

TEST(ModelSummary, DescribesTiedFlatCheckpoint) {
  ModelSummary s = summarize_model(kModelFixtures + "qwen3_5_flat");
  EXPECT_EQ(s.model_parameters, s.total_parameters);
  const std::string text = format_summary_text(s);
  EXPECT_NE(text.find("head:         tied (reads model.embed_tokens.weight)"), std::string::npos) << text;
  EXPECT_NE(text.find("flat layout (prefix 'model.')"), std::string::npos) << text;
  EXPECT_EQ(text.find("unused:"), std::string::npos) << text;
  auto j = nlohmann::json::parse(format_summary_json(s));
  EXPECT_EQ(j["head_tensor"], "model.embed_tokens.weight");
  EXPECT_EQ(j["weight_layout"], "flat");
}

TEST(ModelSummary, DescribesDrafterAndCountsPerDtype) {
  TempDir dir;
  ModelConfig c = test::write_checkpoint(dir.path().string(), test::tiny_dflash_config(), "");
  // Rewrite the weights with one f32 norm among bf16 tensors, as some checkpoints store them.
  SafetensorsWriter w;
  for (const auto& e : expected_tensors(c, ""))
    w.add(e.name, Tensor::zeros(e.name == "hidden_norm.weight" ? DType::F32 : DType::BF16, e.shape));
  w.write(dir.file("model.safetensors"));
  ModelSummary s = summarize_model(dir.path().string());
  EXPECT_EQ(s.parameters_by_dtype.at(DType::F32), 16);
  EXPECT_EQ(s.parameters_by_dtype.at(DType::BF16), s.total_parameters - 16);
  const std::string text = format_summary_text(s);
  EXPECT_NE(
      text.find(
          "drafter:      block size 16, mask token id 60, target layer ids [1, 9, 17, 25, 33] of 36 target layers"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("parameters:   F32 16; BF16 "), std::string::npos) << text;
  auto j = nlohmann::json::parse(format_summary_json(s));
  EXPECT_EQ(j["family"], "dflash");
  EXPECT_EQ(j["weight_layout"], "drafter");
  EXPECT_EQ(j["dflash"]["block_size"], 16);
  EXPECT_EQ(j["dflash"]["mask_token_id"], 60);
  EXPECT_EQ(j["dflash"]["target_layer_ids"], nlohmann::json({1, 9, 17, 25, 33}));
  EXPECT_EQ(j["dflash"]["num_target_layers"], 36);
}

}  // namespace
}  // namespace specserve
