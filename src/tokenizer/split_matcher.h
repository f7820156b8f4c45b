#pragma once
// Pattern matchers for the Split pre-tokenizer: find every match of a pattern in a piece of text,
// left to right and non-overlapping, as Oniguruma's find_iter does for Hugging Face tokenizers.
//
// Three regexes get a hand-written scanner (fast_splitter.cpp): the Qwen2/Qwen3 pattern, the
// Qwen3.5 pattern (\p{M} joins letter runs) and the GPT-2 pattern of ByteLevel(use_regex). Any
// other regex goes through PCRE2 (pcre2_matcher.cpp), which is also the test oracle for the
// scanners. String patterns match literally.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace specserve::tokenizer {

struct Span {
  uint32_t begin = 0;
  uint32_t end = 0;
};

class SplitMatcher {
 public:
  virtual ~SplitMatcher() = default;
  // Appends the matches in `text` (valid UTF-8) to `out`, offsets relative to text.
  virtual void find_matches(std::string_view text, std::vector<Span>& out) const = 0;
  virtual std::string describe() const = 0;
};

// The exact pattern strings the scanners implement (as they appear in tokenizer.json).
extern const char* const kQwen2Pattern;
extern const char* const kQwen35Pattern;
extern const char* const kGpt2Pattern;

enum class FastPattern { Qwen2, Qwen35, Gpt2 };

// A hand-written scanner for one of the known patterns.
std::unique_ptr<SplitMatcher> make_fast_matcher(FastPattern which);

// A PCRE2 matcher for any regex (Unicode classes, look-arounds). `\s` / `\S` are rewritten to the
// White_Space set that Oniguruma uses (PCRE2 alone would also count U+180E), and the Qwen
// contraction group to ASCII-only case folding (Oniguruma does not fold U+017F to 's' there).
std::unique_ptr<SplitMatcher> make_pcre2_matcher(const std::string& pattern);

// The scanner when `pattern` is a known one (and allow_fast), else PCRE2.
std::unique_ptr<SplitMatcher> make_regex_matcher(const std::string& pattern, bool allow_fast = true);

// Literal string matches (HF `{"String": ...}` patterns).
std::unique_ptr<SplitMatcher> make_literal_matcher(const std::string& literal);

}  // namespace specserve::tokenizer
