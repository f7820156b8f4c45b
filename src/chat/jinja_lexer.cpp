#include "chat/jinja_lexer.h"

#include <cctype>
#include <cstring>

#include "chat/py_text.h"
#include "core/error.h"

namespace specserve::chat::jinja {

namespace {

[[noreturn]] void syntax_error(int line, const std::string& msg) {
  fail("template syntax error: line {}: {}", line, msg);
}

// Python's \s for str patterns (str.isspace), starting at byte i; returns the byte length or 0.
size_t space_at(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return py::isspace(c) ? 1 : 0;
  const size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
  if (i + len > s.size()) return 0;
  const auto cps = py::code_points(s.substr(i, len));
  return (cps.size() == 1 && py::isspace(cps[0])) ? len : 0;
}

size_t skip_spaces(std::string_view s, size_t i) {
  while (i < s.size()) {
    const size_t l = space_at(s, i);
    if (!l) break;
    i += l;
  }
  return i;
}

std::string rstrip_py(std::string_view s) { return py::strip(s, nullptr, false, true); }

bool all_space(std::string_view s) {
  if (s.empty()) return false;
  size_t i = 0;
  while (i < s.size()) {
    const size_t l = space_at(s, i);
    if (!l) return false;
    i += l;
  }
  return true;
}

int count_newlines(std::string_view s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

// Python's unicode-escape decoding of a string literal body.
std::string decode_string_literal(std::string_view body, int line) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    if (c != '\\' || i + 1 >= body.size()) {
      out.push_back(c);
      continue;
    }
    const char e = body[++i];
    auto hex = [&](size_t digits) -> uint32_t {
      if (i + digits >= body.size()) syntax_error(line, "truncated escape in string literal");
      uint32_t v = 0;
      for (size_t k = 1; k <= digits; ++k) {
        const char h = body[i + k];
        if (!std::isxdigit(static_cast<unsigned char>(h))) syntax_error(line, "bad escape in string literal");
        v = v * 16 +
            static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
      }
      i += digits;
      return v;
    };
    switch (e) {
      case '\n': break;  // line continuation
      case '\\': out.push_back('\\'); break;
      case '\'': out.push_back('\''); break;
      case '"': out.push_back('"'); break;
      case 'a': out.push_back('\a'); break;
      case 'b': out.push_back('\b'); break;
      case 'f': out.push_back('\f'); break;
      case 'n': out.push_back('\n'); break;
      case 'r': out.push_back('\r'); break;
      case 't': out.push_back('\t'); break;
      case 'v': out.push_back('\v'); break;
      case 'x': py::append_utf8(out, hex(2)); break;
      case 'u': py::append_utf8(out, hex(4)); break;
      case 'U': {
        const uint32_t cp = hex(8);
        if (cp > 0x10FFFF) syntax_error(line, "bad \\U escape in string literal");
        py::append_utf8(out, cp);
        break;
      }
      default:
        if (e >= '0' && e <= '7') {
          uint32_t v = static_cast<uint32_t>(e - '0');
          for (int k = 0; k < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7'; ++k) {
            v = v * 8 + static_cast<uint32_t>(body[++i] - '0');
          }
          py::append_utf8(out, v);
        } else {
          out.push_back('\\');  // unknown escapes stay as written
          out.push_back(e);
        }
    }
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string_view source) { normalize_newlines(source); }

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      lex_root();
    }
    tokens_.push_back(Token{TokenType::End, "", line_});
    return std::move(tokens_);
  }

 private:
  // \r\n, \r, \n -> \n; one trailing newline is dropped (keep_trailing_newline=False).
  void normalize_newlines(std::string_view s) {
    src_.reserve(s.size());
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '\r') {
        src_.push_back('\n');
        if (i + 1 < s.size() && s[i + 1] == '\n') ++i;
      } else {
        src_.push_back(s[i]);
      }
    }
    if (!src_.empty() && src_.back() == '\n') src_.pop_back();
  }

  void emit(TokenType t, std::string value, int line) { tokens_.push_back(Token{t, std::move(value), line}); }

  // Finds the next tag opener at or after pos_. Returns npos when there is none.
  size_t find_opener(size_t from, char& kind) const {
    for (size_t i = from; i + 1 < src_.size(); ++i) {
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) {
        kind = src_[i + 1];
        return i;
      }
    }
    return std::string::npos;
  }

  void lex_root() {
    char kind = 0;
    const size_t open = find_opener(pos_, kind);
    if (open == std::string::npos) {
      emit_text(src_.substr(pos_), line_);
      line_ += count_newlines(std::string_view(src_).substr(pos_));
      pos_ = src_.size();
      line_starting_ = false;
      return;
    }
    std::string text = src_.substr(pos_, open - pos_);
    const int text_line = line_;
    size_t after = open + 2;
    char sign = 0;
    if (after < src_.size() && (src_[after] == '-' || src_[after] == '+')) sign = src_[after++];

    // A raw block: {% raw %} ... {% endraw %}
    bool raw = false;
    size_t raw_body = 0;
    if (kind == '%') {
      size_t p = skip_spaces(src_, after);
      if (src_.compare(p, 3, "raw") == 0 &&
          !(p + 3 < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[p + 3])) || src_[p + 3] == '_'))) {
        p = skip_spaces(src_, p + 3);
        if (src_.compare(p, 3, "-%}") == 0) {
          raw = true;
          raw_body = skip_spaces(src_, p + 3);
        } else if (src_.compare(p, 2, "%}") == 0) {
          raw = true;
          raw_body = p + 2;
        }
      }
    }

    if (sign == '-') {
      text = rstrip_py(text);
    } else if (sign != '+' && kind != '{') {  // lstrip_blocks: blocks and comments only
      const size_t nl = text.rfind('\n');
      const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
      if ((l_pos > 0 || line_starting_) && all_space(std::string_view(text).substr(l_pos))) text.resize(l_pos);
    }
    emit_text(text, text_line);
    line_ += count_newlines(std::string_view(src_).substr(pos_, open - pos_));
    pos_ = open;

    if (raw) {
      lex_raw(raw_body);
      return;
    }
    if (kind == '#') {
      lex_comment(after);
    } else {
      lex_tag(kind == '{' ? TokenType::VarBegin : TokenType::BlockBegin, after);
    }
  }

  void emit_text(const std::string& text, int line) {
    if (!text.empty()) emit(TokenType::Text, text, line);
  }

  // Block-end rule with trim_blocks: "+%}" | "-%}\s*" | "%}\n?". Returns the end or npos.
  size_t match_block_end(size_t p) const {
    if (src_.compare(p, 3, "+%}") == 0) return p + 3;
    if (src_.compare(p, 3, "-%}") == 0) return skip_spaces(src_, p + 3);
    if (src_.compare(p, 2, "%}") == 0) return (p + 2 < src_.size() && src_[p + 2] == '\n') ? p + 3 : p + 2;
    return std::string::npos;
  }
  size_t match_var_end(size_t p) const {
    if (src_.compare(p, 3, "-}}") == 0) return skip_spaces(src_, p + 3);
    if (src_.compare(p, 2, "}}") == 0) return p + 2;
    return std::string::npos;
  }

  void lex_comment(size_t p) {
    for (size_t i = p; i < src_.size(); ++i) {
      size_t end = std::string::npos;
      if (src_.compare(i, 3, "+#}") == 0) {
        end = i + 3;
      } else if (src_.compare(i, 3, "-#}") == 0) {
        end = skip_spaces(src_, i + 3);
      } else if (src_.compare(i, 2, "#}") == 0) {
        end = (i + 2 < src_.size() && src_[i + 2] == '\n') ? i + 3 : i + 2;
      }
      if (end != std::string::npos) {
        line_ += count_newlines(std::string_view(src_).substr(pos_, end - pos_));
        line_starting_ = src_[end - 1] == '\n';
        pos_ = end;
        return;
      }
    }
    syntax_error(line_, "Missing end of comment tag");
  }

  void lex_raw(size_t body) {
    // (.*?)((?:{%(-|+|))\s*endraw\s*(?:+%}|-%}\s*|%}\n?))
    for (size_t i = body; i + 1 < src_.size(); ++i) {
      if (src_[i] != '{' || src_[i + 1] != '%') continue;
      size_t p = i + 2;
      char sign = 0;
      if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) sign = src_[p++];
      p = skip_spaces(src_, p);
      if (src_.compare(p, 6, "endraw") != 0) continue;
      p = skip_spaces(src_, p + 6);
      const size_t end = match_block_end(p);
      if (end == std::string::npos) continue;
      std::string text = src_.substr(body, i - body);
      if (sign == '-') {
        text = rstrip_py(text);
      } else if (sign != '+') {
        const size_t nl = text.rfind('\n');
        const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
        if ((l_pos > 0 || line_starting_) && all_space(std::string_view(text).substr(l_pos))) text.resize(l_pos);
      }
      emit_text(text, line_);
      line_ += count_newlines(std::string_view(src_).substr(pos_, end - pos_));
      line_starting_ = src_[end - 1] == '\n';
      pos_ = end;
      return;
    }
    syntax_error(line_, "Missing end of raw directive");
  }

  void lex_tag(TokenType begin, size_t p) {
    const bool block = begin == TokenType::BlockBegin;
    emit(begin, "", line_);
    line_ += count_newlines(std::string_view(src_).substr(pos_, p - pos_));
    std::vector<char> balance;
    while (true) {
      if (p >= src_.size()) {
        syntax_error(line_, block ? "unexpected end of template, expected end of block"
                                  : "unexpected end of template, expected 'end of print statement'");
      }
      if (balance.empty()) {
        const size_t end = block ? match_block_end(p) : match_var_end(p);
        if (end != std::string::npos) {
          emit(block ? TokenType::BlockEnd : TokenType::VarEnd, "", line_);
          line_ += count_newlines(std::string_view(src_).substr(p, end - p));
          line_starting_ = src_[end - 1] == '\n';
          pos_ = end;
          return;
        }
      }
      if (const size_t l = space_at(src_, p)) {
        line_ += src_[p] == '\n';
        p += l;
        continue;
      }
      const char c = src_[p];
      if (std::isdigit(static_cast<unsigned char>(c))) {
        p = lex_number(p);
        continue;
      }
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t e = p;
        while (e < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) ++e;
        emit(TokenType::Name, src_.substr(p, e - p), line_);
        p = e;
        continue;
      }
      if (c == '\'' || c == '"') {
        size_t e = p + 1;
        while (e < src_.size() && src_[e] != c) {
          if (src_[e] == '\\') ++e;
          ++e;
        }
        if (e >= src_.size()) syntax_error(line_, "unexpected char '" + std::string(1, c) + "' (unterminated string)");
        emit(TokenType::String, decode_string_literal(std::string_view(src_).substr(p + 1, e - p - 1), line_), line_);
        line_ += count_newlines(std::string_view(src_).substr(p, e - p));
        p = e + 1;
        continue;
      }
      static const char* const kOps[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~", "[",
                                         "]",  "(",  ")",  "{",  "}",  ">",  "<", "=", ".", ":", "|", ",", ";"};
      bool matched = false;
      for (const char* op : kOps) {
        const size_t n = std::char_traits<char>::length(op);
        if (src_.compare(p, n, op) == 0) {
          const std::string o(op);
          if (o == "(" || o == "[" || o == "{") {
            balance.push_back(o == "(" ? ')' : o == "[" ? ']' : '}');
          } else if (o == ")" || o == "]" || o == "}") {
            if (balance.empty()) syntax_error(line_, "unexpected '" + o + "'");
            if (balance.back() != o[0])
              syntax_error(line_, "unexpected '" + o + "', expected '" + std::string(1, balance.back()) + "'");
            balance.pop_back();
          }
          emit(TokenType::Operator, o, line_);
          p += n;
          matched = true;
          break;
        }
      }
      if (!matched) syntax_error(line_, "unexpected char '" + std::string(1, c) + "'");
    }
  }

  // integer_re / float_re of Jinja (decimal, 0b / 0o / 0x, '_' separators, exponents).
  size_t lex_number(size_t p) {
    auto digits = [&](size_t q, auto pred) {
      size_t e = q;
      while (e < src_.size() &&
             (pred(src_[e]) || (src_[e] == '_' && e + 1 < src_.size() && pred(src_[e + 1]) && e > q)))
        ++e;
      return e;
    };
    auto dec = [](char ch) { return ch >= '0' && ch <= '9'; };
    // Float: digits ( (.digits)? e[+-]?digits | .digits )
    size_t e = digits(p, dec);
    size_t f = e;
    bool is_float = false;
    if (f < src_.size() && src_[f] == '.' && f + 1 < src_.size() && dec(src_[f + 1])) {
      f = digits(f + 1, dec);
      is_float = true;
    }
    if (f < src_.size() && (src_[f] == 'e' || src_[f] == 'E')) {
      size_t g = f + 1;
      if (g < src_.size() && (src_[g] == '+' || src_[g] == '-')) ++g;
      if (g < src_.size() && dec(src_[g])) {
        f = digits(g, dec);
        is_float = true;
      }
    }
    if (is_float) {
      std::string lit;
      for (size_t i = p; i < f; ++i) {
        if (src_[i] != '_') lit.push_back(src_[i]);
      }
      emit(TokenType::Float, lit, line_);
      return f;
    }
    // Integers with a base prefix.
    if (src_[p] == '0' && p + 1 < src_.size() && src_[p + 1] != '\0' && std::strchr("bBoOxX", src_[p + 1])) {
      const char b = static_cast<char>(std::tolower(src_[p + 1]));
      auto pred = [b](char ch) {
        if (b == 'b') return ch == '0' || ch == '1';
        if (b == 'o') return ch >= '0' && ch <= '7';
        return static_cast<bool>(std::isxdigit(static_cast<unsigned char>(ch)));
      };
      size_t q = p + 2;
      size_t end = q;
      while (end < src_.size() && (pred(src_[end]) || src_[end] == '_')) ++end;
      std::string body;
      for (size_t i = q; i < end; ++i) {
        if (src_[i] != '_') body.push_back(src_[i]);
      }
      if (body.empty()) syntax_error(line_, "invalid integer literal");
      const int base = b == 'b' ? 2 : b == 'o' ? 8 : 16;
      unsigned long long v = 0;
      for (char ch : body) {
        const int d = std::isdigit(static_cast<unsigned char>(ch)) ? ch - '0' : std::tolower(ch) - 'a' + 10;
        if (v > (~0ULL - static_cast<unsigned>(d)) / static_cast<unsigned>(base))
          syntax_error(line_, "integer literal too large");
        v = v * static_cast<unsigned>(base) + static_cast<unsigned>(d);
      }
      emit(TokenType::Integer, std::to_string(v), line_);
      return end;
    }
    std::string lit;
    for (size_t i = p; i < e; ++i) {
      if (src_[i] != '_') lit.push_back(src_[i]);
    }
    emit(TokenType::Integer, lit, line_);
    return e;
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> lex(std::string_view source) { return Lexer(source).run(); }

}  // namespace specserve::chat::jinja
