// tokenizer.json loading: both merge forms, bad files as clear Errors, invalid UTF-8 input.
#include <gtest/gtest.h>

#include "core/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer_fixtures.h"

namespace specserve::tokenizer::testing {
namespace {

TEST(Loader, StringMergesEqualPairMerges) {
  nlohmann::json tj = base_json("gpt2");
  for (auto& m : tj["model"]["merges"]) m = m[0].get<std::string>() + " " + m[1].get<std::string>();
  const Tokenizer string_form = Tokenizer::from_json(tj);
  const Tokenizer& pair_form = variant_tokenizer("gpt2");
  for (const auto& line : corpus()) ASSERT_EQ(string_form.encode(line), pair_form.encode(line)) << line;
}

TEST(Loader, LoadsFileAndDirectory) {
  const auto dir = qwen3_dir();
  ASSERT_FALSE(dir.empty());
  const Tokenizer a = Tokenizer::load(dir);
  const Tokenizer b = Tokenizer::load(dir / "tokenizer.json");
  EXPECT_EQ(a.encode("Hello world"), b.encode("Hello world"));
  EXPECT_FALSE(a.split_special_tokens_default());
  EXPECT_EQ(*a.token_to_id("<|im_end|>"), 151645);
  EXPECT_EQ(*a.id_to_token(151645), "<|im_end|>");
  EXPECT_EQ(*a.token_to_id("Ġworld"), 1879);
}

TEST(Loader, SplitSpecialTokensOption) {
  const Tokenizer& tok = variant_tokenizer("qwen3");
  const auto ids = tok.encode("<|im_start|>hi", EncodeOptions{true});
  EXPECT_NE(ids.front(), 151644);
  EXPECT_EQ(tok.decode(ids), "<|im_start|>hi");
  // Non-special added tokens are still matched.
  EXPECT_EQ(tok.encode("<think>", EncodeOptions{true}), (std::vector<int32_t>{151667}));
}

TEST(Loader, ErrorsAreClear) {
  auto bad = [](nlohmann::json tj) {
    EXPECT_THROW(Tokenizer::from_json(tj), specserve::Error) << tj.dump().substr(0, 200);
  };
  const nlohmann::json good = base_json("gpt2");
  bad(nlohmann::json::array());
  bad(nlohmann::json::object());
  {
    auto t = good;
    t["model"]["type"] = "WordPiece";
    bad(t);
  }
  {
    auto t = good;
    t["model"]["merges"].push_back(nlohmann::json::array({"nope", "x"}));
    bad(t);
  }
  {
    auto t = good;
    t["model"]["merges"].push_back("a b c");
    bad(t);
  }
  {
    auto t = good;
    t["normalizer"] = {{"type", "Lowercase"}};
    bad(t);
  }
  {
    auto t = good;
    t["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(("}}}, {"behavior", "Isolated"}};
    bad(t);
  }
  {
    auto t = good;
    t["model"]["vocab"] = "not an object";
    bad(t);
  }
  {
    auto t = good;
    t["added_tokens"] = {{{"id", "x"}, {"content", "y"}}};
    bad(t);
  }
  EXPECT_THROW(Tokenizer::load("/nonexistent/tokenizer.json"), specserve::Error);
}

TEST(Loader, InvalidUtf8InputIsRepairedNotFatal) {
  const Tokenizer& tok = variant_tokenizer("qwen3");
  const std::string bad = "ok\xFF\xC0 then \xE2\x82";
  const auto ids = tok.encode(bad);
  EXPECT_EQ(tok.decode(ids), "ok\uFFFD\uFFFD then \uFFFD");
  EXPECT_TRUE(tok.encode("").empty());
}

}  // namespace
}  // namespace specserve::tokenizer::testing

namespace specserve::tokenizer::testing {
namespace {

// Byte-level BPE is lossless only when every byte has a token (the fuzzer's round-trip check
// relies on it for the GPT-2-style fixture).
TEST(Loader, ByteLevelVocabCoversAllBytes) {
  for (const std::string base : {"qwen3", "gpt2"}) {
    const Tokenizer& tok = variant_tokenizer(base);
    for (int b = 0; b < 256; ++b) {
      const std::string ch = ByteLevelMap::get().encode_bytes(std::string(1, static_cast<char>(b)));
      EXPECT_TRUE(tok.token_to_id(ch).has_value()) << base << " byte " << b;
    }
  }
}

}  // namespace
}  // namespace specserve::tokenizer::testing
