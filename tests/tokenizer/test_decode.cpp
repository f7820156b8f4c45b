// Decoding against HF (random id sequences: UTF-8 fragments, special tokens, unknown ids) and the
// streaming detokenizer: never splits a character, concatenation == decode(all).
#include <gtest/gtest.h>

#include <random>

#include "tokenizer/byte_level.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/utf8.h"
#include "tokenizer_fixtures.h"

namespace specserve::tokenizer::testing {
namespace {

class Decode : public ::testing::TestWithParam<std::string> {};

TEST_P(Decode, RandomIdSequencesMatchHuggingFace) {
  const std::string base = GetParam();
  const Tokenizer& tok = variant_tokenizer(base);
  size_t n = 0;
  for (const auto& rec : read_jsonl(fixture_dir() / ("decode_" + base + ".jsonl"))) {
    ASSERT_FALSE(rec.contains("error")) << rec.dump();
    const auto ids = rec["ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(tok.decode(ids), rec["text"].get<std::string>()) << rec.dump();
    EXPECT_EQ(tok.decode(ids, /*skip_special_tokens=*/true), rec["skip_special"].get<std::string>()) << rec.dump();
    ++n;
  }
  EXPECT_EQ(n, 400u);
}

TEST_P(Decode, StreamingConcatenationEqualsDecode) {
  const std::string base = GetParam();
  const Tokenizer& tok = variant_tokenizer(base);
  auto check = [&](const std::vector<int32_t>& ids, bool skip) {
    StreamDecoder stream(tok, skip);
    std::string all;
    for (const int32_t id : ids) {
      const std::string piece = stream.push(id);
      EXPECT_TRUE(is_valid_utf8(piece));
      // A piece never ends inside a character that later bytes would complete.
      EXPECT_EQ(utf8_stable_prefix(piece), piece.size());
      all += piece;
    }
    all += stream.finish();
    EXPECT_EQ(all, tok.decode(ids, skip)) << ids_to_string(ids);
  };
  for (const auto& rec : read_jsonl(fixture_dir() / ("decode_" + base + ".jsonl"))) {
    check(rec["ids"].get<std::vector<int32_t>>(), false);
    check(rec["ids"].get<std::vector<int32_t>>(), true);
  }
  for (const auto& line : corpus()) check(tok.encode(line), false);
}

INSTANTIATE_TEST_SUITE_P(Bases, Decode, ::testing::Values("qwen3", "gpt2"));

TEST(Decode, StreamingEmitsAsSoonAsCharacterIsComplete) {
  const Tokenizer& tok = variant_tokenizer("qwen3");
  // "😁" is 4 bytes: F0 9F 98 81. Byte tokens are ids 0..255 in byte-level char order.
  const std::string emoji = "😁";
  std::vector<int32_t> byte_ids;
  for (unsigned char b : emoji) {
    const auto id = tok.token_to_id(ByteLevelMap::get().encode_bytes(std::string(1, static_cast<char>(b))));
    ASSERT_TRUE(id.has_value());
    byte_ids.push_back(*id);
  }
  StreamDecoder stream(tok);
  EXPECT_EQ(stream.push(byte_ids[0]), "");
  EXPECT_EQ(stream.push(byte_ids[1]), "");
  EXPECT_EQ(stream.push(byte_ids[2]), "");
  EXPECT_EQ(stream.pending_bytes(), 3u);
  EXPECT_EQ(stream.push(byte_ids[3]), emoji);
  EXPECT_EQ(stream.finish(), "");
  // An incomplete character at the end becomes U+FFFD, exactly as decode() does.
  StreamDecoder cut(tok);
  EXPECT_EQ(cut.push(byte_ids[0]), "");
  EXPECT_EQ(cut.push(tok.encode("a")[0]), "\uFFFDa");
  EXPECT_EQ(cut.push(byte_ids[0]), "");
  EXPECT_EQ(cut.finish(), "\uFFFD");
}

TEST(Decode, UnknownIdsAreSkipped) {
  const Tokenizer& tok = variant_tokenizer("qwen3");
  EXPECT_EQ(tok.decode(std::vector<int32_t>{9707, 151700, -5, 1879}), "Hello world");
  EXPECT_EQ(tok.token_bytes(151700), "");
  EXPECT_EQ(tok.token_bytes(220), " ");
  EXPECT_EQ(tok.token_bytes(151644), "<|im_start|>");
}

TEST(Decode, RandomStreamsOfBytes) {
  const Tokenizer& tok = variant_tokenizer("qwen3");
  std::mt19937 rng(7);
  for (int iter = 0; iter < 2000; ++iter) {
    std::vector<int32_t> ids;
    const int len = 1 + static_cast<int>(rng() % 12);
    for (int k = 0; k < len; ++k) ids.push_back(static_cast<int32_t>(rng() % (rng() % 3 ? 256 : 151700)));
    StreamDecoder stream(tok);
    std::string all;
    for (const int32_t id : ids) all += stream.push(id);
    all += stream.finish();
    ASSERT_EQ(all, tok.decode(ids)) << ids_to_string(ids);
  }
}

}  // namespace
}  // namespace specserve::tokenizer::testing
