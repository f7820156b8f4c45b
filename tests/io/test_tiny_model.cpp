// make_tiny_model's output: loads through the io layer, passes the loader's layout check, is
// deterministic per seed, and its tokenizer files have the Qwen byte-level shape.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>

#include "io/checkpoint_layout.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "io_test_util.h"
#include "tiny_model.h"
#include "tiny_tokenizer.h"

namespace specserve {
namespace {

using json = nlohmann::json;
using test::read_bytes;
using test::TempDir;

tiny::TinyModelInfo make(const std::string& dir, uint64_t seed, const std::string& family = "qwen3_5",
                         DType dtype = DType::BF16) {
  return tiny::write_tiny_model({dir, seed, family, dtype});
}

TEST(TinyModel, Qwen3_5HybridLoadsAndPassesLayoutCheck) {
  TempDir dir;
  tiny::TinyModelInfo info = make(dir.path().string(), 0);
  ModelConfig c = load_model_config(dir.path().string());
  EXPECT_EQ(c.family, ModelFamily::Qwen3_5);
  EXPECT_EQ(c.architectures, std::vector<std::string>{"Qwen3_5ForCausalLM"});
  EXPECT_EQ(c.hidden_size, 128);
  EXPECT_EQ(c.intermediate_size, 256);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.rotary_dim(), 16);
  EXPECT_EQ(c.layer_types, (std::vector<LayerType>{LayerType::LinearAttention, LayerType::LinearAttention,
                                                   LayerType::LinearAttention, LayerType::FullAttention}));
  EXPECT_EQ(c.linear_key_head_dim, 32);
  EXPECT_EQ(c.linear_value_head_dim, 32);
  EXPECT_EQ(c.linear_num_key_heads, 2);
  EXPECT_EQ(c.linear_num_value_heads, 4);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.dtype, DType::BF16);
  EXPECT_EQ(c.vocab_size, info.vocab_rows);
  EXPECT_EQ(c.vocab_size % 64, 0);

  auto ckpt = Checkpoint::open(dir.path().string());
  CheckpointLayout layout = resolve_checkpoint_layout(c, *ckpt);
  EXPECT_EQ(layout.prefix, "model.");
  EXPECT_EQ(layout.head, "model.embed_tokens.weight");
  EXPECT_TRUE(layout.unused.empty());
  int64_t params = 0;
  for (const auto& name : ckpt->names()) {
    EXPECT_EQ(ckpt->entry(name).dtype, DType::BF16) << name;
    params += ckpt->entry(name).shape.numel();
  }
  EXPECT_EQ(params, info.parameters);

  // Role-specific values: zero-centred norms near 0, A_log = log(U(1, 16)).
  Tensor norm = to_f32(ckpt->get("model.layers.0.input_layernorm.weight"));
  for (int64_t i = 0; i < norm.numel(); ++i) EXPECT_LE(std::fabs(norm.as<float>()[i]), 0.101f);
  Tensor a_log = to_f32(ckpt->get("model.layers.0.linear_attn.A_log"));
  for (int64_t i = 0; i < a_log.numel(); ++i) {
    EXPECT_GE(a_log.as<float>()[i], 0.0f);
    EXPECT_LE(a_log.as<float>()[i], std::log(16.0f) + 0.01f);
  }
}

TEST(TinyModel, Qwen3F32LoadsAndPassesLayoutCheck) {
  TempDir dir;
  make(dir.path().string(), 3, "qwen3", DType::F32);
  ModelConfig c = load_model_config(dir.path().string());
  EXPECT_EQ(c.family, ModelFamily::Qwen3);
  EXPECT_EQ(c.num_attention_layers(), 4);
  EXPECT_EQ(c.dtype, DType::F32);
  auto ckpt = Checkpoint::open(dir.path().string());
  EXPECT_NO_THROW(resolve_checkpoint_layout(c, *ckpt));
  EXPECT_EQ(ckpt->entry("model.layers.2.self_attn.q_proj.weight").dtype, DType::F32);
  EXPECT_EQ(ckpt->entry("model.layers.2.self_attn.q_proj.weight").shape, Shape({256, 128}));  // no gate
}

TEST(TinyModel, SameSeedSameBytesOtherSeedOtherWeights) {
  TempDir a, b, c;
  make(a.path().string(), 7);
  make(b.path().string(), 7);
  make(c.path().string(), 8);
  for (const char* f :
       {"model.safetensors", "config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json"})
    EXPECT_TRUE(read_bytes(a.file(f)) == read_bytes(b.file(f))) << f;  // not EXPECT_EQ: megabytes
  EXPECT_TRUE(read_bytes(a.file("model.safetensors")) != read_bytes(c.file("model.safetensors")));
  EXPECT_TRUE(read_bytes(a.file("tokenizer.json")) == read_bytes(c.file("tokenizer.json")));
}

TEST(TinyModel, RejectsBadOptions) {
  TempDir dir;
  test::expect_error([&] { make(dir.path().string(), 0, "llama"); }, "--family must be qwen3 or qwen3_5");
  test::expect_error([&] { make(dir.path().string(), 0, "qwen3", DType::F16); }, "--dtype must be bf16 or f32");
}

TEST(TinyTokenizer, ByteSymbolsInGpt2Order) {
  std::vector<uint8_t> order = tiny::gpt2_byte_order();
  ASSERT_EQ(order.size(), 256u);
  EXPECT_EQ(order[0], '!');
  EXPECT_EQ(order[187], 0xff);
  EXPECT_EQ(order[188], 0x00);  // the first non-printable byte
  EXPECT_EQ(tiny::gpt2_byte_symbol(' '), "Ġ");
  EXPECT_EQ(tiny::gpt2_byte_symbol('\n'), "Ċ");
  EXPECT_EQ(tiny::gpt2_byte_symbol(0), "Ā");
  EXPECT_EQ(tiny::gpt2_byte_symbol('a'), "a");
}

TEST(TinyTokenizer, TokenizerFilesHaveQwenShape) {
  TempDir dir;
  tiny::TinyModelInfo info = make(dir.path().string(), 0);
  json tok = json::parse(read_bytes(dir.file("tokenizer.json")));
  const json& vocab = tok["model"]["vocab"];
  EXPECT_EQ(tok["model"]["type"], "BPE");
  // Same ids as in Qwen's (and GPT-2's) vocab for the byte symbols.
  EXPECT_EQ(vocab["!"], 0);
  EXPECT_EQ(vocab["Ġ"], 220);
  EXPECT_EQ(vocab["Ċ"], 198);
  EXPECT_EQ(vocab["Ā"], 188);
  const json& merges = tok["model"]["merges"];
  EXPECT_GE(merges.size(), 100u);
  for (const auto& m : merges) {
    const std::string s = m.get<std::string>();
    const size_t space = s.find(' ');
    ASSERT_NE(space, std::string::npos) << s;
    EXPECT_TRUE(vocab.contains(s.substr(0, space))) << s;
    EXPECT_TRUE(vocab.contains(s.substr(space + 1))) << s;
    EXPECT_TRUE(vocab.contains(s.substr(0, space) + s.substr(space + 1))) << s;
  }
  const json& added = tok["added_tokens"];
  ASSERT_EQ(added.size(), 3u);
  const int64_t first_special = static_cast<int64_t>(vocab.size());
  EXPECT_EQ(added[0]["content"], "<|endoftext|>");
  EXPECT_EQ(added[0]["id"], first_special);
  EXPECT_EQ(added[1]["content"], "<|im_start|>");
  EXPECT_EQ(added[2]["content"], "<|im_end|>");
  EXPECT_EQ(added[2]["id"], first_special + 2);
  EXPECT_LE(first_special + 3, info.vocab_rows);
  EXPECT_GT(first_special + 3 + 64, info.vocab_rows);  // rounded up to 64, no further

  json cfg = json::parse(read_bytes(dir.file("tokenizer_config.json")));
  EXPECT_NE(cfg["chat_template"].get<std::string>().find("<|im_start|>"), std::string::npos);
  EXPECT_EQ(cfg["eos_token"], "<|im_end|>");
  json gen = json::parse(read_bytes(dir.file("generation_config.json")));
  EXPECT_EQ(gen["eos_token_id"], json({first_special + 2, first_special}));
}

}  // namespace
}  // namespace specserve
