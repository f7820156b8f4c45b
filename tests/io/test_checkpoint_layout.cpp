// The layout check: prefix resolution for every layout, and an error naming each kind of problem.
#include <gtest/gtest.h>

#include <algorithm>

#include "checkpoint_builder.h"
#include "io/checkpoint_layout.h"
#include "checkpoint_layout_of.h"

namespace specserve {
namespace {

using test::drop;
using test::expect_error;
using test::TempDir;
using test::tiny_dflash_config;
using test::tiny_qwen3_5_config;
using test::write_checkpoint;

using test::kModelFixtures;

const ExpectedTensor& find(const std::vector<ExpectedTensor>& v, const std::string& name) {
  auto it = std::find_if(v.begin(), v.end(), [&](const ExpectedTensor& t) { return t.name == name; });
  EXPECT_NE(it, v.end()) << name;
  return *it;
}

// Checkpoints saved by transformers 5.17 (tests/fixtures/model).
TEST(CheckpointLayout, ResolvesTransformersCheckpoints) {
  CheckpointLayout vl = layout_of(kModelFixtures + "qwen3_5_vl");
  EXPECT_EQ(vl.prefix, "model.language_model.");
  EXPECT_EQ(vl.head, "lm_head.weight");
  EXPECT_TRUE(std::find(vl.unused.begin(), vl.unused.end(), "mtp.fc.weight") != vl.unused.end());
  EXPECT_TRUE(std::all_of(vl.unused.begin(), vl.unused.end(), [](const std::string& n) {
    return n.rfind("model.visual.", 0) == 0 || n.rfind("mtp.", 0) == 0;
  }));
  CheckpointLayout flat = layout_of(kModelFixtures + "qwen3_5_flat");
  EXPECT_EQ(flat.prefix, "model.");
  EXPECT_EQ(flat.head, "model.embed_tokens.weight");
  EXPECT_TRUE(flat.unused.empty());
  EXPECT_EQ(layout_of(kModelFixtures + "qwen3_tied").head, "model.embed_tokens.weight");
  CheckpointLayout untied = layout_of(kModelFixtures + "qwen3_untied");
  EXPECT_EQ(untied.head, "lm_head.weight");
  EXPECT_EQ(untied.tensors.size(), 3u + 3 * 11);  // embed, norm, lm_head + 11 per layer
}

// The worked shapes of docs/MODELS.md §3.7.
TEST(CheckpointLayout, Qwen3_6_27bShapes) {
  ModelConfig c;
  c.family = ModelFamily::Qwen3_5;
  c.vocab_size = 248320, c.hidden_size = 5120, c.intermediate_size = 17408, c.num_layers = 4;
  c.num_heads = 24, c.num_kv_heads = 4, c.head_dim = 256, c.attn_output_gate = true;
  c.linear_conv_kernel_dim = 4, c.linear_key_head_dim = 128, c.linear_value_head_dim = 128;
  c.linear_num_key_heads = 16, c.linear_num_value_heads = 48;
  c.layer_types = {LayerType::LinearAttention, LayerType::LinearAttention, LayerType::LinearAttention,
                   LayerType::FullAttention};
  auto t = expected_tensors(c, "model.language_model.");
  const std::string d = "model.language_model.layers.0.linear_attn.", a = "model.language_model.layers.3.self_attn.";
  EXPECT_EQ(find(t, "model.language_model.embed_tokens.weight").shape, Shape({248320, 5120}));
  EXPECT_EQ(find(t, "lm_head.weight").shape, Shape({248320, 5120}));
  EXPECT_EQ(find(t, d + "in_proj_qkv.weight").shape, Shape({10240, 5120}));
  EXPECT_EQ(find(t, d + "in_proj_z.weight").shape, Shape({6144, 5120}));
  EXPECT_EQ(find(t, d + "in_proj_b.weight").shape, Shape({48, 5120}));
  EXPECT_EQ(find(t, d + "in_proj_a.weight").shape, Shape({48, 5120}));
  EXPECT_EQ(find(t, d + "conv1d.weight").shape, Shape({10240, 1, 4}));
  EXPECT_EQ(find(t, d + "A_log").shape, Shape({48}));
  EXPECT_EQ(find(t, d + "dt_bias").shape, Shape({48}));
  EXPECT_EQ(find(t, d + "norm.weight").shape, Shape({128}));
  EXPECT_EQ(find(t, d + "out_proj.weight").shape, Shape({5120, 6144}));
  EXPECT_EQ(find(t, a + "q_proj.weight").shape, Shape({12288, 5120}));
  EXPECT_EQ(find(t, a + "k_proj.weight").shape, Shape({1024, 5120}));
  EXPECT_EQ(find(t, a + "o_proj.weight").shape, Shape({5120, 6144}));
  EXPECT_EQ(find(t, a + "q_norm.weight").shape, Shape({256}));
  EXPECT_EQ(find(t, "model.language_model.layers.3.mlp.gate_proj.weight").shape, Shape({17408, 5120}));
  EXPECT_EQ(find(t, "model.language_model.layers.3.mlp.down_proj.weight").shape, Shape({5120, 17408}));
}

TEST(CheckpointLayout, AcceptsBothQwen3_5PrefixesWhateverTheConfigLayout) {
  TempDir dir;
  write_checkpoint(dir.path().string(), tiny_qwen3_5_config(/*nested=*/true, /*tied=*/true), "model.");
  EXPECT_EQ(layout_of(dir.path().string()).prefix, "model.");
  write_checkpoint(dir.path().string(), tiny_qwen3_5_config(false, true), "model.language_model.");
  EXPECT_EQ(layout_of(dir.path().string()).prefix, "model.language_model.");
}

TEST(CheckpointLayout, DrafterTensorsWithAndWithoutPrefix) {
  TempDir dir;
  ModelConfig c = write_checkpoint(dir.path().string(), tiny_dflash_config(), "");
  CheckpointLayout l = layout_of(dir.path().string());
  EXPECT_EQ(l.prefix, "");
  EXPECT_EQ(l.head, "");
  EXPECT_EQ(l.tensors.size(), 25u);  // docs/DFLASH.md §2.2: a 2-layer drafter has 3 + 11 per layer
  EXPECT_EQ(find(l.tensors, "fc.weight").shape, Shape({16, 5 * 16}));
  write_checkpoint(dir.path().string(), tiny_dflash_config(), "model.");
  EXPECT_EQ(layout_of(dir.path().string()).prefix, "model.");
}

TEST(CheckpointLayout, MissingTensorIsNamedWithTheReason) {
  TempDir dir;
  write_checkpoint(dir.path().string(), tiny_qwen3_5_config(false, true), "model.",
                   [](auto& t) { drop(t, "model.layers.3.self_attn.q_proj.weight"); });
  expect_error([&] { layout_of(dir.path().string()); },
               "missing tensor 'model.layers.3.self_attn.q_proj.weight' [32, 16] (layer 3 is full_attention)");
  write_checkpoint(dir.path().string(), tiny_qwen3_5_config(false, true), "model.",
                   [](auto& t) { drop(t, "model.layers.1.linear_attn.A_log"); });
  expect_error([&] { layout_of(dir.path().string()); },
               "missing tensor 'model.layers.1.linear_attn.A_log' [4] (layer 1 is linear_attention)");
}

TEST(CheckpointLayout, UntiedModelNeedsLmHead) {
  TempDir dir;
  write_checkpoint(dir.path().string(), tiny_qwen3_5_config(true, /*tied=*/false), "model.language_model.",
                   [](auto& t) { drop(t, "lm_head.weight"); });
  expect_error([&] { layout_of(dir.path().string()); },
               "missing tensor 'lm_head.weight' [64, 16] (tie_word_embeddings is false)");
}

TEST(CheckpointLayout, TiedModelListsAStoredLmHeadAsUnused) {
  TempDir dir;
  write_checkpoint(dir.path().string(), tiny_qwen3_5_config(false, true), "model.", [](auto& t) {
    t.push_back({"lm_head.weight", Shape({64, 16}), ""});
  });
  CheckpointLayout l = layout_of(dir.path().string());
  EXPECT_EQ(l.head, "model.embed_tokens.weight");
  EXPECT_EQ(l.unused, std::vector<std::string>{"lm_head.weight"});
}

TEST(CheckpointLayout, RejectsWrongShapeAndNonFloatDtype) {
  TempDir dir;
  write_checkpoint(dir.path().string(), tiny_qwen3_5_config(false, true), "model.", [](auto& t) {
    for (auto& e : t)
      if (e.name == "model.layers.0.linear_attn.conv1d.weight") e.shape = Shape({32, 4});
  });
  expect_error([&] { layout_of(dir.path().string()); },
               "tensor 'model.layers.0.linear_attn.conv1d.weight' has shape [32, 4], the config implies [32, 1, 4]");
  write_checkpoint(dir.path().string(), tiny_qwen3_5_config(false, true), "model.", nullptr, DType::I32);
  expect_error([&] { layout_of(dir.path().string()); }, "has dtype I32; weights must be F32, F16 or BF16");
}

TEST(CheckpointLayout, DrafterFcMustMatchTheTaps) {
  TempDir dir;
  write_checkpoint(dir.path().string(), tiny_dflash_config(), "", [](auto& t) {
    for (auto& e : t)
      if (e.name == "fc.weight") e.shape = Shape({16, 4 * 16});
  });
  expect_error([&] { layout_of(dir.path().string()); },
               "tensor 'fc.weight' has shape [16, 64], the config implies [16, 80]");
}

TEST(CheckpointLayout, RejectsDFlash2AndDSparkDrafters) {
  TempDir dir;
  write_checkpoint(dir.path().string(), tiny_dflash_config(), "", [](auto& t) {
    t.push_back({"markov_head.markov_w1", Shape({4}), ""});
  });
  expect_error([&] { layout_of(dir.path().string()); }, "tensor 'markov_head.markov_w1' belongs to a DSpark drafter");
}

TEST(CheckpointLayout, WrongFamilyCheckpointIsNamed) {
  TempDir dir;
  write_checkpoint(dir.path().string(), tiny_qwen3_5_config(false, true), "model.");
  test::write_bytes(dir.file("config.json"), tiny_dflash_config());
  expect_error([&] { layout_of(dir.path().string()); },
               "no 'fc.weight' or 'model.fc.weight' tensor, so this is not a dflash checkpoint");
  test::write_bytes(dir.file("config.json"), tiny_qwen3_5_config(false, true));
  write_checkpoint(dir.path().string(), tiny_dflash_config(), "");
  test::write_bytes(dir.file("config.json"), tiny_qwen3_5_config(false, true));
  expect_error([&] { layout_of(dir.path().string()); },
               "no 'model.language_model.embed_tokens.weight' or 'model.embed_tokens.weight' tensor");
}

}  // namespace
}  // namespace specserve
