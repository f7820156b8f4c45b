// PCRE2 (UTF + UCP, JIT) matcher for Split patterns that have no hand-written scanner, and the
// oracle for the scanners. Patterns are rewritten so that PCRE2 agrees with Oniguruma, the engine
// behind Hugging Face tokenizers: `\s` is the White_Space property and the Qwen contraction group
// folds ASCII case only.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <memory>

#include "core/error.h"
#include "tokenizer/split_matcher.h"
#include "tokenizer/utf8.h"

namespace specserve::tokenizer {

namespace {

// White_Space, as class members (without brackets).
constexpr const char* kWhiteSpaceMembers =
    R"(\t-\r\x{20}\x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000})";

std::string rewrite_for_oniguruma(const std::string& pattern) {
  std::string p = pattern;
  const std::string caseless = "(?i:'s|'t|'re|'ve|'m|'ll|'d)";
  const std::string ascii = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])";
  for (size_t at = p.find(caseless); at != std::string::npos; at = p.find(caseless, at + ascii.size())) {
    p.replace(at, caseless.size(), ascii);
  }
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char e = p[i + 1];
      if (e == 's') {
        out += in_class ? std::string(kWhiteSpaceMembers) : "[" + std::string(kWhiteSpaceMembers) + "]";
      } else if (e == 'S' && !in_class) {
        out += "[^" + std::string(kWhiteSpaceMembers) + "]";
      } else {
        out += c;
        out += e;
      }
      ++i;
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal member.
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];
      continue;
    }
    if (in_class && c == '[' && i + 1 < p.size() && p[i + 1] == ':') {  // POSIX class [:name:]
      const size_t close = p.find(":]", i + 2);
      if (close != std::string::npos) {
        out.append(p, i, close + 2 - i);
        i = close + 1;
        continue;
      }
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

struct CodeDeleter {
  void operator()(pcre2_code* c) const { pcre2_code_free(c); }
};
struct MatchDataDeleter {
  void operator()(pcre2_match_data* m) const { pcre2_match_data_free(m); }
};

class Pcre2Matcher final : public SplitMatcher {
 public:
  explicit Pcre2Matcher(const std::string& pattern) : pattern_(pattern) {
    const std::string rewritten = rewrite_for_oniguruma(pattern);
    int err = 0;
    PCRE2_SIZE err_off = 0;
    code_.reset(pcre2_compile(reinterpret_cast<PCRE2_SPTR>(rewritten.data()), rewritten.size(), PCRE2_UTF | PCRE2_UCP,
                              &err, &err_off, nullptr));
    if (!code_) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      fail("cannot compile pre-tokenizer regex '{}' at offset {}: {}", pattern, err_off,
           reinterpret_cast<const char*>(msg));
    }
    jit_ = pcre2_jit_compile(code_.get(), PCRE2_JIT_COMPLETE) == 0;
  }

  std::string describe() const override { return "PCRE2 regex " + pattern_; }

  void find_matches(std::string_view text, std::vector<Span>& out) const override {
    std::unique_ptr<pcre2_match_data, MatchDataDeleter> md(pcre2_match_data_create_from_pattern(code_.get(), nullptr));
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    const size_t n = text.size();
    size_t pos = 0;
    while (pos <= n) {
      const int rc = jit_ ? pcre2_jit_match(code_.get(), subject, n, pos, PCRE2_NO_UTF_CHECK, md.get(), nullptr)
                          : pcre2_match(code_.get(), subject, n, pos, PCRE2_NO_UTF_CHECK, md.get(), nullptr);
      if (rc == PCRE2_ERROR_NOMATCH) break;
      if (rc < 0) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(rc, msg, sizeof msg);
        fail("pre-tokenizer regex match failed: {}", reinterpret_cast<const char*>(msg));
      }
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
      const size_t b = ov[0], e = ov[1];
      out.push_back(Span{static_cast<uint32_t>(b), static_cast<uint32_t>(e)});
      if (e > b) {
        pos = e;
      } else {  // empty match: step over one character
        if (e >= n) break;
        size_t len;
        bool ok;
        decode_utf8(text, e, len, ok);
        pos = e + len;
      }
    }
  }

 private:
  std::string pattern_;
  std::unique_ptr<pcre2_code, CodeDeleter> code_;
  bool jit_ = false;
};

class LiteralMatcher final : public SplitMatcher {
 public:
  explicit LiteralMatcher(std::string literal) : literal_(std::move(literal)) {}
  std::string describe() const override { return "literal '" + literal_ + "'"; }
  void find_matches(std::string_view text, std::vector<Span>& out) const override {
    if (literal_.empty()) return;
    for (size_t at = text.find(literal_); at != std::string_view::npos;
         at = text.find(literal_, at + literal_.size())) {
      out.push_back(Span{static_cast<uint32_t>(at), static_cast<uint32_t>(at + literal_.size())});
    }
  }

 private:
  std::string literal_;
};

}  // namespace

std::unique_ptr<SplitMatcher> make_pcre2_matcher(const std::string& pattern) {
  return std::make_unique<Pcre2Matcher>(pattern);
}

std::unique_ptr<SplitMatcher> make_regex_matcher(const std::string& pattern, bool allow_fast) {
  if (allow_fast) {
    if (pattern == kQwen2Pattern) return make_fast_matcher(FastPattern::Qwen2);
    if (pattern == kQwen35Pattern) return make_fast_matcher(FastPattern::Qwen35);
    if (pattern == kGpt2Pattern) return make_fast_matcher(FastPattern::Gpt2);
  }
  return make_pcre2_matcher(pattern);
}

std::unique_ptr<SplitMatcher> make_literal_matcher(const std::string& literal) {
  return std::make_unique<LiteralMatcher>(literal);
}

}  // namespace specserve::tokenizer
