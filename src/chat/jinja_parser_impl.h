#pragma once
// Internal to the Jinja parser (jinja_parser.cpp, jinja_parse_statements.cpp, jinja_parse_expressions.cpp):
// the recursive-descent Parser over the lexer's tokens. One class, its statement and expression halves
// defined in their own files.
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "chat/jinja_ast.h"
#include "chat/jinja_lexer.h"
#include "core/error.h"

namespace specserve::chat::jinja {

inline constexpr int kMaxNesting = 200;

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

  Body parse_template() {
    Body body = subparse({});
    if (cur().type != TokenType::End) fail_here("unexpected end tag '" + cur().value + "'");
    return body;
  }

 private:
  // ---- token helpers ------------------------------------------------------------------------
  const Token& cur() const { return toks_[pos_]; }
  const Token& look(size_t k = 1) const { return toks_[std::min(pos_ + k, toks_.size() - 1)]; }
  void next() {
    if (pos_ + 1 < toks_.size()) ++pos_;
  }
  bool is_op(const char* op) const { return cur().type == TokenType::Operator && cur().value == op; }
  bool is_name(const char* n) const { return cur().type == TokenType::Name && cur().value == n; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(const char* n) {
    if (!is_name(n)) return false;
    next();
    return true;
  }
  [[noreturn]] void fail_here(const std::string& msg) const {
    fail("template syntax error: line {}: {}", cur().line, msg);
  }
  std::string describe(const Token& t) const {
    switch (t.type) {
      case TokenType::End: return "end of template";
      case TokenType::VarEnd: return "end of print statement";
      case TokenType::BlockEnd: return "end of statement block";
      case TokenType::Text: return "template data";
      default: return t.value;
    }
  }
  void expect_op(const char* op) {
    if (!skip_op(op)) fail_here(std::string("expected '") + op + "', got '" + describe(cur()) + "'");
  }
  std::string expect_name() {
    if (cur().type != TokenType::Name) fail_here("expected a name, got '" + describe(cur()) + "'");
    std::string v = cur().value;
    next();
    return v;
  }
  void expect(TokenType t, const char* what) {
    if (cur().type != t) fail_here(std::string("expected ") + what + ", got '" + describe(cur()) + "'");
    next();
  }
  template <typename T>
  std::unique_ptr<T> make(typename T::Kind k) {
    return std::make_unique<T>(k, cur().line);
  }

  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& parser) : p(parser) {
      if (++p.depth_ > kMaxNesting) p.fail_here("template nested too deeply");
    }
    ~DepthGuard() { --p.depth_; }
  };

  // ---- statements (jinja_parse_statements.cpp) -------------------------------------------------
  // Parses until a block tag whose name is in `ends` (left unconsumed, positioned on the name).
  Body subparse(const std::set<std::string>& ends);
  StmtPtr parse_statement();
  StmtPtr parse_for();
  StmtPtr parse_if();
  StmtPtr parse_set();
  void parse_signature(MacroDef& m);
  static void scan_names(const Expr* e, MacroDef& m);
  static void scan_body(const Body& body, MacroDef& m);
  StmtPtr parse_macro();
  StmtPtr parse_call_block();
  StmtPtr parse_filter_block();
  StmtPtr parse_with();
  Target parse_assign_target(bool with_tuple, bool with_namespace, const std::set<std::string>& extra_end);
  Target to_target(const Expr& e);

  // ---- expressions (jinja_parse_expressions.cpp) -----------------------------------------------
  bool is_tuple_end(const std::set<std::string>& extra_end) const;
  ExprPtr parse_tuple(bool simplified, bool with_condexpr, const std::set<std::string>& extra_end,
                      bool explicit_parens);
  ExprPtr parse_expression(bool with_condexpr) { return with_condexpr ? parse_condexpr() : parse_or(); }
  ExprPtr parse_condexpr();
  ExprPtr binary(Expr::Kind k, ExprPtr a, ExprPtr b, int line, std::string op = {});
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr node);
  ExprPtr parse_subscribed();
  void parse_call_args(Expr& e);
  ExprPtr parse_call(ExprPtr node);
  ExprPtr parse_filter(ExprPtr node, bool start_inline);
  ExprPtr parse_test(ExprPtr node);
  ExprPtr parse_filter_expr(ExprPtr node);

  std::vector<Token> toks_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace specserve::chat::jinja
