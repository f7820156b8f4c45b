// The hand-written scanners against PCRE2 running the same regexes: on the corpus and on random
// strings drawn from every character class the regexes distinguish (and random code points).
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <gtest/gtest.h>

#include <random>
#include <set>

#include "tokenizer/split_matcher.h"
#include "tokenizer/unicode.h"
#include "tokenizer/utf8.h"
#include "core/error.h"
#include "tokenizer_fixtures.h"

namespace specserve::tokenizer::testing {
namespace {

std::string spans_to_string(std::string_view text, const std::vector<Span>& spans) {
  nlohmann::json j = nlohmann::json::array();
  for (const Span s : spans) j.push_back(std::string(text.substr(s.begin, s.end - s.begin)));
  return j.dump();
}

// Code points where PCRE2's Unicode 14 tables and utf8proc's Unicode 15 tables disagree on a
// class the regexes use (newly assigned characters); random strings avoid them.
const std::set<uint32_t>& unicode_version_differences() {
  static const std::set<uint32_t> diffs = [] {
    std::set<uint32_t> d;
    const char* pats[] = {R"(^\p{L}$)", R"(^\p{N}$)", R"(^\p{M}$)"};
    const uint8_t bits[] = {kLetter, kNumber, kMark};
    for (int k = 0; k < 3; ++k) {
      int err;
      PCRE2_SIZE off;
      pcre2_code* re = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pats[k]), PCRE2_ZERO_TERMINATED,
                                     PCRE2_UTF | PCRE2_UCP, &err, &off, nullptr);
      pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
      pcre2_match_data* md = pcre2_match_data_create_from_pattern(re, nullptr);
      for (uint32_t cp = 0; cp < 0x110000; ++cp) {
        if (cp >= 0xD800 && cp <= 0xDFFF) continue;
        std::string s;
        append_utf8(s, cp);
        const bool pcre = pcre2_match(re, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), 0, 0, md, nullptr) >= 0;
        const bool ours = (char_class(cp) & bits[k]) != 0;
        if (pcre != ours) d.insert(cp);
      }
      pcre2_match_data_free(md);
      pcre2_code_free(re);
    }
    return d;
  }();
  return diffs;
}

struct Case {
  FastPattern which;
  const char* pattern;
  const char* name;
};
const Case kCases[] = {{FastPattern::Qwen2, kQwen2Pattern, "qwen2"},
                       {FastPattern::Qwen35, kQwen35Pattern, "qwen35"},
                       {FastPattern::Gpt2, kGpt2Pattern, "gpt2"}};

void expect_same(const SplitMatcher& fast, const SplitMatcher& slow, std::string_view text, const char* name) {
  std::vector<Span> a, b;
  fast.find_matches(text, a);
  slow.find_matches(text, b);
  ASSERT_EQ(spans_to_string(text, a), spans_to_string(text, b))
      << name << " on " << nlohmann::json(std::string(text)).dump();
}

TEST(Splitter, UnicodeTablesMostlyAgreeWithPcre2) {
  // Unicode 14 -> 15 added a few thousand characters; anything more would be a table bug.
  EXPECT_LT(unicode_version_differences().size(), 6000u);
  EXPECT_EQ(unicode_version_differences().count('a'), 0u);
}

TEST(Splitter, FastEqualsPcre2OnCorpus) {
  for (const Case& c : kCases) {
    auto fast = make_fast_matcher(c.which);
    auto slow = make_pcre2_matcher(c.pattern);
    for (const auto& line : corpus()) expect_same(*fast, *slow, line, c.name);
  }
}

TEST(Splitter, FastEqualsPcre2OnRandomStrings) {
  const auto& skip = unicode_version_differences();
  // Pools from each class the regexes look at, plus fully random code points.
  const std::vector<std::vector<uint32_t>> pools = {
      {'a', 'Z', 'e', 's', 't', 'r', 'v', 'm', 'l', 'd', 'S', 'T', 'R', 'E', 'L', 'D', 0xE9, 0x4E00, 0x0915, 0x05D0},
      {'0', '7', 0x0663, 0x0967, 0x2460, 0x00B2, 0x216B, 0x00BD},
      {' ', ' ', ' ', '\t', '\n', '\r', 0x0B, 0x0C, 0x85, 0xA0, 0x1680, 0x2003, 0x2028, 0x2029, 0x3000, 0x180E},
      {'\'', '\'', '!', '.', ',', '-', '"', '(', '<', '|', 0x2019, 0x00A9, 0x1F600, 0x200D, 0xFE0F, 0x0000, 0x001B,
       0x007F},
      {0x0301, 0x0308, 0x093E, 0x094D, 0x0E34, 0x20DD, 0x0489},
      {0x017F, 0x212A, 0x0130, 0x0131, 0x1E9E},
  };
  std::mt19937 rng(12345);
  for (const Case& c : kCases) {
    auto fast = make_fast_matcher(c.which);
    auto slow = make_pcre2_matcher(c.pattern);
    for (int iter = 0; iter < 20000; ++iter) {
      const int len = 1 + static_cast<int>(rng() % 24);
      std::string s;
      for (int k = 0; k < len; ++k) {
        uint32_t cp;
        if (rng() % 8 == 0) {
          do {
            cp = rng() % 0x110000;
          } while ((cp >= 0xD800 && cp <= 0xDFFF) || skip.count(cp));
        } else {
          const auto& pool = pools[rng() % pools.size()];
          cp = pool[rng() % pool.size()];
        }
        append_utf8(s, cp);
      }
      expect_same(*fast, *slow, s, c.name);
      if (HasFatalFailure()) return;
    }
  }
}

TEST(Splitter, QwenExamples) {
  auto m = make_fast_matcher(FastPattern::Qwen2);
  auto split = [&](std::string_view s) {
    std::vector<Span> v;
    m->find_matches(s, v);
    return spans_to_string(s, v);
  };
  EXPECT_EQ(split("Hello world"), R"(["Hello"," world"])");
  EXPECT_EQ(split("   Hello"), R"(["  "," Hello"])");
  EXPECT_EQ(split("333"), R"(["3","3","3"])");
  EXPECT_EQ(split("I'M ok"), R"(["I","'M"," ok"])");
  EXPECT_EQ(split("x'ſ"), R"(["x","'ſ"])");  // not a contraction (no ſ -> s folding): "'" + letter run
  EXPECT_EQ(split("a  \n\n  b"), R"(["a","  \n\n"," "," b"])");
  EXPECT_EQ(split("!!\n\nx"), R"(["!!\n\n","x"])");
  EXPECT_EQ(split("\tfoo"), R"(["\tfoo"])");
}

TEST(Splitter, PathologicalInputIsLinear) {
  // 1M characters of each kind must split quickly (no quadratic scans over whitespace runs).
  auto m = make_fast_matcher(FastPattern::Qwen2);
  for (const std::string unit : {" ", "a", "1", "!", "\n", " \n", "  x", "é", "\u0301"}) {
    std::string s;
    while (s.size() < 1000000) s += unit;
    std::vector<Span> v;
    m->find_matches(s, v);
    ASSERT_FALSE(v.empty());
    EXPECT_EQ(v.back().end, s.size());
  }
}

TEST(Splitter, Pcre2RewritesWhiteSpaceLikeOniguruma) {
  auto m = make_pcre2_matcher(R"(\s+|[^\s]+)");
  std::vector<Span> v;
  const std::string s = "a\u180Eb c";  // U+180E is not White_Space (PCRE2 alone would say it is)
  m->find_matches(s, v);
  EXPECT_EQ(spans_to_string(s, v), R"(["a᠎b"," ","c"])");
}

TEST(Splitter, BadRegexIsAnError) { EXPECT_THROW(make_pcre2_matcher("(unclosed"), specserve::Error); }

}  // namespace
}  // namespace specserve::tokenizer::testing
