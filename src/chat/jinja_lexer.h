#pragma once
// Jinja2 lexer with the environment transformers uses (trim_blocks, lstrip_blocks, default
// delimiters, keep_trailing_newline=False): template text, tags and expression tokens, with
// Jinja's exact whitespace rules ({%- -%} {{- -}} {#- -#}, {%+ %}, raw blocks, newline
// normalisation).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace specserve::chat::jinja {

enum class TokenType : uint8_t {
  Text,        // template data
  VarBegin,    // {{
  VarEnd,      // }}
  BlockBegin,  // {%
  BlockEnd,    // %}
  Name,
  String,    // value: the decoded string
  Integer,   // value: decimal digits
  Float,     // value: the literal (underscores removed)
  Operator,  // value: the operator text
  End,
};

struct Token {
  TokenType type;
  std::string value;
  int line = 1;
};

// Throws specserve::Error ("template syntax error: line N: ...") on malformed input.
std::vector<Token> lex(std::string_view source);

}  // namespace specserve::chat::jinja
