// Token ids and decoded text against Hugging Face `tokenizers` 0.23.2 on the whole corpus, for the
// real Qwen3 tokenizer, a Qwen3.5-regex variant, a GPT-2-style tokenizer and pipeline variants
// (fixtures from tools/reference/tokenizer/gen_tokenizer_reference.py).
#include <gtest/gtest.h>

#include "tokenizer/unicode.h"
#include "tokenizer_fixtures.h"

namespace specserve::tokenizer::testing {
namespace {

class HfIds : public ::testing::TestWithParam<std::string> {};

void check_variant(const std::string& variant, bool fast) {
  const Tokenizer& tok = variant_tokenizer(variant, fast);
  const auto records = read_jsonl(fixture_dir() / ("ids_" + variant + ".jsonl"));
  ASSERT_FALSE(records.empty());
  const auto& lines = corpus();
  size_t mismatches = 0, decode_mismatches = 0;
  for (const auto& rec : records) {
    const size_t line = rec["line"].get<size_t>();
    ASSERT_LT(line, lines.size());
    const std::vector<int32_t> expected = rec["ids"].get<std::vector<int32_t>>();
    const std::vector<int32_t> got = tok.encode(lines[line]);
    if (got != expected && ++mismatches <= 5) {
      ADD_FAILURE() << variant << " line " << line << " " << nlohmann::json(lines[line]).dump() << "\n  expected "
                    << ids_to_string(expected) << "\n  got      " << ids_to_string(got);
    }
    const std::string want_text =
        rec.contains("decoded") ? rec["decoded"].get<std::string>() : normalize(lines[line], NormalForm::NFC);
    const std::string text = tok.decode(expected);
    if (text != want_text && ++decode_mismatches <= 5) {
      ADD_FAILURE() << variant << " decode line " << line << "\n  expected " << nlohmann::json(want_text).dump()
                    << "\n  got      " << nlohmann::json(text).dump();
    }
  }
  EXPECT_EQ(mismatches, 0u) << variant << ": " << mismatches << " of " << records.size() << " lines differ";
  EXPECT_EQ(decode_mismatches, 0u);
}

TEST_P(HfIds, MatchesHuggingFace) { check_variant(GetParam(), /*fast=*/true); }

TEST_P(HfIds, MatchesHuggingFaceWithPcre2Splitter) { check_variant(GetParam(), /*fast=*/false); }

INSTANTIATE_TEST_SUITE_P(Variants, HfIds,
                         ::testing::Values("qwen3", "qwen35", "qwen3_split_special", "gpt2", "gpt2_ignore_merges",
                                           "gpt2_prefix_space", "gpt2_nfkc", "gpt2_split_special", "gpt2_removed",
                                           "gpt2_merged_prev", "gpt2_merged_next", "gpt2_contiguous_invert",
                                           "gpt2_string_split"),
                         [](const auto& info) { return info.param; });

// decode(encode(x)) == NFC(x) on the whole corpus for the tokenizers without lossy added tokens.
TEST(HfIds, RoundTripIsNfc) {
  for (const std::string variant : {"qwen3", "qwen35"}) {
    const Tokenizer& tok = variant_tokenizer(variant);
    for (const auto& line : corpus()) {
      EXPECT_EQ(tok.decode(tok.encode(line)), normalize(line, NormalForm::NFC))
          << variant << " " << nlohmann::json(line).dump();
    }
  }
}

// The worked ids of docs/MODELS.md §4.1.
TEST(HfIds, Qwen3WorkedExamples) {
  const Tokenizer& tok = variant_tokenizer("qwen3");
  EXPECT_EQ(tok.encode("Hello world"), (std::vector<int32_t>{9707, 1879}));
  EXPECT_EQ(tok.encode("   "), (std::vector<int32_t>{262}));
  EXPECT_EQ(tok.encode("12345 3.14"), (std::vector<int32_t>{16, 17, 18, 19, 20, 220, 18, 13, 16, 19}));
  EXPECT_EQ(tok.encode("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"),
            (std::vector<int32_t>{151644, 872, 198, 13048, 151645, 198, 151644, 77091, 198}));
  EXPECT_EQ(tok.encode("<think>\n\n</think>\n\n"), (std::vector<int32_t>{151667, 271, 151668, 271}));
  EXPECT_TRUE(tok.is_special(151644));
  EXPECT_FALSE(tok.is_special(151667));  // <think> is an added token but not special
  EXPECT_EQ(tok.id_limit(), 151669);
}

}  // namespace
}  // namespace specserve::tokenizer::testing
