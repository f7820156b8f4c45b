// Hand-written scanners for the three byte-level BPE pre-tokenizer regexes. Each scans left to
// right and, at every position, tries the alternatives in the regex's order with the same greedy
// and backtracking outcome as a backtracking engine, in time linear in the input:
//
//   Qwen2/3:  (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}
//             | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//   Qwen3.5:  the same with [\p{L}\p{M}]+ for letter runs and \p{M} excluded from the symbol run
//   GPT-2:    's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// PCRE2 with the same patterns is the oracle for these in tests/tokenizer/test_splitter.cpp.
#include <array>

#include "tokenizer/split_matcher.h"
#include "tokenizer/unicode.h"
#include "tokenizer/utf8.h"

namespace specserve::tokenizer {

const char* const kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kQwen35Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

namespace {

constexpr std::array<uint8_t, 128> make_ascii_classes() {
  std::array<uint8_t, 128> t{};
  for (int c = 'a'; c <= 'z'; ++c) t[c] = kLetter | kWordChar;
  for (int c = 'A'; c <= 'Z'; ++c) t[c] = kLetter | kWordChar;
  for (int c = '0'; c <= '9'; ++c) t[c] = kNumber | kWordChar;
  for (int c = 0x09; c <= 0x0D; ++c) t[c] = kWhitespace;
  t[' '] = kWhitespace;
  t['_'] = kWordChar;
  return t;
}
constexpr std::array<uint8_t, 128> kAsciiClasses = make_ascii_classes();

// A decoded view of the text: code point classes and byte offsets, so that the scanner can look
// ahead and back by characters.
struct Chars {
  std::vector<uint32_t> offset;  // byte offset of each char, plus one past the end
  std::vector<uint8_t> cls;
  std::vector<uint32_t> cp;

  explicit Chars(std::string_view text) {
    const auto* p = reinterpret_cast<const unsigned char*>(text.data());
    const size_t n = text.size();
    offset.reserve(n + 1);
    cls.reserve(n);
    cp.reserve(n);
    size_t i = 0;
    while (i < n) {
      offset.push_back(static_cast<uint32_t>(i));
      if (p[i] < 0x80) {
        cp.push_back(p[i]);
        cls.push_back(kAsciiClasses[p[i]]);
        ++i;
      } else {
        size_t len;
        const uint32_t c = decode_valid_utf8(p + i, len);
        cp.push_back(c);
        cls.push_back(char_class(c));
        i += len;
      }
    }
    offset.push_back(static_cast<uint32_t>(n));
  }
  size_t size() const { return cls.size(); }
};

inline uint32_t lower_ascii(uint32_t c) { return (c >= 'A' && c <= 'Z') ? c + 32 : c; }

// Length in chars of a contraction at i ('s 't 're 've 'm 'll 'd), or 0.
size_t contraction(const Chars& t, size_t i, bool caseless) {
  const size_t n = t.size();
  if (t.cp[i] != '\'' || i + 1 >= n) return 0;
  auto at = [&](size_t k) { return caseless ? lower_ascii(t.cp[k]) : t.cp[k]; };
  const uint32_t a = at(i + 1);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (i + 2 < n) {
    const uint32_t b = at(i + 2);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  }
  return 0;
}

class FastMatcher final : public SplitMatcher {
 public:
  explicit FastMatcher(FastPattern which) : which_(which) {}

  std::string describe() const override {
    switch (which_) {
      case FastPattern::Qwen2: return "fast scanner (Qwen2/Qwen3 regex)";
      case FastPattern::Qwen35: return "fast scanner (Qwen3.5 regex)";
      case FastPattern::Gpt2: return "fast scanner (GPT-2 regex)";
    }
    return "fast scanner";
  }

  void find_matches(std::string_view text, std::vector<Span>& out) const override {
    const Chars t(text);
    const size_t n = t.size();
    size_t i = 0;
    while (i < n) {
      const size_t end = which_ == FastPattern::Gpt2 ? match_gpt2(t, i) : match_qwen(t, i);
      out.push_back(Span{t.offset[i], t.offset[end]});
      i = end;
    }
  }

 private:
  // End (char index) of the match that starts at i. The alternatives cover every character, so
  // there is always a match of at least one char.
  size_t match_qwen(const Chars& t, size_t i) const {
    const size_t n = t.size();
    const bool q35 = which_ == FastPattern::Qwen35;
    const uint8_t letters = q35 ? (kLetter | kMark) : kLetter;
    const uint8_t not_symbol = q35 ? (kWhitespace | kLetter | kMark | kNumber) : (kWhitespace | kLetter | kNumber);
    const uint32_t c = t.cp[i];
    const uint8_t f = t.cls[i];
    auto run = [&](size_t k, uint8_t mask) {
      while (k < n && (t.cls[k] & mask)) ++k;
      return k;
    };
    auto is_newline = [&](size_t k) { return t.cp[k] == '\r' || t.cp[k] == '\n'; };
    // (?i:'s|'t|'re|'ve|'m|'ll|'d)
    if (const size_t len = contraction(t, i, /*caseless=*/true)) return i + len;
    // [^\r\n\p{L}\p{N}]?\p{L}+   (Qwen3.5: [\p{L}\p{M}]+)
    if (f & letters) return run(i, letters);
    if (c != '\r' && c != '\n' && !(f & (kLetter | kNumber)) && i + 1 < n && (t.cls[i + 1] & letters)) {
      return run(i + 1, letters);
    }
    // \p{N}
    if (f & kNumber) return i + 1;
    // ' ?[^\s\p{L}\p{N}]+[\r\n]*'   (Qwen3.5: [^\s\p{L}\p{M}\p{N}])
    size_t k = i;
    if (c == ' ' && i + 1 < n && !(t.cls[i + 1] & not_symbol)) k = i + 1;
    if (!(t.cls[k] & not_symbol)) {
      while (k < n && !(t.cls[k] & not_symbol)) ++k;
      while (k < n && is_newline(k)) ++k;
      return k;
    }
    // Whitespace alternatives. (Everything else has matched above.)
    const size_t ws_end = run(i, kWhitespace);
    // \s*[\r\n]+ : ends after the last newline of the whitespace run.
    for (size_t k2 = ws_end; k2 > i; --k2) {
      if (is_newline(k2 - 1)) return k2;
    }
    // \s+(?!\S) : leaves the last whitespace char to the next word.
    if (ws_end == n || ws_end - i == 1) return ws_end;
    return ws_end - 1;
  }

  size_t match_gpt2(const Chars& t, size_t i) const {
    const size_t n = t.size();
    const uint32_t c = t.cp[i];
    auto run = [&](size_t k, uint8_t mask) {
      while (k < n && (t.cls[k] & mask)) ++k;
      return k;
    };
    if (const size_t len = contraction(t, i, /*caseless=*/false)) return i + len;
    const size_t after_space = (c == ' ' && i + 1 < n) ? i + 1 : i;
    // ' ?\p{L}+', ' ?\p{N}+'
    for (const uint8_t mask : {uint8_t{kLetter}, uint8_t{kNumber}}) {
      if (t.cls[after_space] & mask) return run(after_space, mask);
      if (t.cls[i] & mask) return run(i, mask);
    }
    // ' ?[^\s\p{L}\p{N}]+'
    constexpr uint8_t not_symbol = kWhitespace | kLetter | kNumber;
    if (!(t.cls[after_space] & not_symbol)) {
      size_t k = after_space;
      while (k < n && !(t.cls[k] & not_symbol)) ++k;
      return k;
    }
    // '\s+(?!\S)' then '\s+'
    const size_t ws_end = run(i, kWhitespace);
    if (ws_end == n || ws_end - i == 1) return ws_end;
    return ws_end - 1;
  }

  FastPattern which_;
};

}  // namespace

std::unique_ptr<SplitMatcher> make_fast_matcher(FastPattern which) { return std::make_unique<FastMatcher>(which); }

}  // namespace specserve::tokenizer
