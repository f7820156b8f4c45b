#include "chat/jinja_parser.h"

#include <charconv>
#include <set>

#include "chat/jinja_builtins.h"
#include "chat/jinja_lexer.h"
#include "core/error.h"

namespace specserve::chat::jinja {

namespace {

constexpr int kMaxNesting = 200;

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
  [[noreturn]] void fail_here(const std::string& msg) const { fail("template syntax error: line {}: {}", cur().line, msg); }
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

  // ---- statements ---------------------------------------------------------------------------
  // Parses until a block tag whose name is in `ends` (left unconsumed, positioned on the name).
  Body subparse(const std::set<std::string>& ends) {
    DepthGuard guard(*this);
    Body body;
    while (true) {
      const Token& t = cur();
      if (t.type == TokenType::End) {
        if (!ends.empty()) {
          std::string want;
          for (const auto& e : ends) want += (want.empty() ? "'" : " or '") + e + "'";
          fail_here("unexpected end of template, expected " + want);
        }
        return body;
      }
      if (t.type == TokenType::Text) {
        auto s = make<Stmt>(Stmt::Kind::Output);
        s->text = t.value;
        body.push_back(std::move(s));
        next();
      } else if (t.type == TokenType::VarBegin) {
        next();
        auto s = make<Stmt>(Stmt::Kind::Print);
        s->expr = parse_tuple(false, true, {}, false);
        expect(TokenType::VarEnd, "end of print statement");
        body.push_back(std::move(s));
      } else if (t.type == TokenType::BlockBegin) {
        next();
        if (cur().type == TokenType::Name && ends.count(cur().value)) return body;
        body.push_back(parse_statement());
        expect(TokenType::BlockEnd, "end of statement block");
      } else {
        fail_here("unexpected '" + describe(t) + "'");
      }
    }
  }

  StmtPtr parse_statement() {
    if (cur().type != TokenType::Name) fail_here("tag name expected");
    const std::string tag = cur().value;
    if (tag == "for") return parse_for();
    if (tag == "if") return parse_if();
    if (tag == "set") return parse_set();
    if (tag == "macro") return parse_macro();
    if (tag == "call") return parse_call_block();
    if (tag == "filter") return parse_filter_block();
    if (tag == "with") return parse_with();
    if (tag == "generation") {
      auto s = make<Stmt>(Stmt::Kind::Scope);
      next();
      expect(TokenType::BlockEnd, "end of statement block");
      s->body = subparse({"endgeneration"});
      next();
      return s;
    }
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) fail_here("'" + tag + "' outside loop");
      auto s = make<Stmt>(tag == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue);
      next();
      return s;
    }
    if (tag == "extends" || tag == "include" || tag == "import" || tag == "from" || tag == "block") {
      fail_here("tag '" + tag + "' is not supported in chat templates");
    }
    fail_here("Encountered unknown tag '" + tag + "'.");
  }

  StmtPtr parse_for() {
    auto s = make<Stmt>(Stmt::Kind::For);
    next();
    s->target = parse_assign_target(true, false, {"in"});
    if (!skip_name("in")) fail_here("expected 'in', got '" + describe(cur()) + "'");
    s->expr = parse_tuple(false, false, {"recursive"}, false);
    if (skip_name("if")) s->cond = parse_expression(true);
    if (is_name("recursive")) fail_here("recursive for loops are not supported");
    expect(TokenType::BlockEnd, "end of statement block");
    ++loop_depth_;
    s->body = subparse({"endfor", "else"});
    --loop_depth_;
    if (skip_name("else")) {
      expect(TokenType::BlockEnd, "end of statement block");
      s->else_body = subparse({"endfor"});
    }
    next();  // endfor
    return s;
  }

  StmtPtr parse_if() {
    auto s = make<Stmt>(Stmt::Kind::If);
    next();
    while (true) {
      s->tests.push_back(parse_tuple(false, false, {}, false));
      expect(TokenType::BlockEnd, "end of statement block");
      s->bodies.push_back(subparse({"elif", "else", "endif"}));
      if (skip_name("elif")) continue;
      if (skip_name("else")) {
        expect(TokenType::BlockEnd, "end of statement block");
        s->else_body = subparse({"endif"});
      }
      next();  // endif
      return s;
    }
  }

  StmtPtr parse_set() {
    const int line = cur().line;
    next();
    Target target = parse_assign_target(true, true, {});
    if (skip_op("=")) {
      auto s = std::make_unique<Stmt>(Stmt::Kind::Set, line);
      s->target = std::move(target);
      s->expr = parse_tuple(false, true, {}, false);
      return s;
    }
    auto s = std::make_unique<Stmt>(Stmt::Kind::SetBlock, line);
    s->target = std::move(target);
    if (is_op("|")) s->expr = parse_filter(nullptr, false);
    expect(TokenType::BlockEnd, "end of statement block");
    s->body = subparse({"endset"});
    next();
    return s;
  }

  void parse_signature(MacroDef& m) {
    expect_op("(");
    while (!is_op(")")) {
      if (!m.params.empty()) expect_op(",");
      m.params.push_back(expect_name());
      if (skip_op("=")) {
        m.defaults.push_back(parse_expression(true));
      } else if (!m.defaults.empty()) {
        fail_here("non-default argument follows default argument");
      }
    }
    expect_op(")");
  }

  static void scan_names(const Expr* e, MacroDef& m) {
    if (!e) return;
    if (e->kind == Expr::Kind::Name) {
      m.uses_varargs |= e->name == "varargs";
      m.uses_kwargs |= e->name == "kwargs";
      m.uses_caller |= e->name == "caller";
    }
    for (const auto& a : e->args) scan_names(a.get(), m);
    for (const auto& a : e->call_args) scan_names(a.get(), m);
    for (const auto& kv : e->call_kwargs) scan_names(kv.second.get(), m);
    scan_names(e->dyn_args.get(), m);
    scan_names(e->dyn_kwargs.get(), m);
  }
  static void scan_body(const Body& body, MacroDef& m) {
    for (const auto& s : body) {
      scan_names(s->expr.get(), m);
      scan_names(s->cond.get(), m);
      for (const auto& t : s->tests) scan_names(t.get(), m);
      for (const auto& b : s->bodies) scan_body(b, m);
      scan_body(s->body, m);
      scan_body(s->else_body, m);
      for (const auto& a : s->assignments) scan_names(a.second.get(), m);
    }
  }

  StmtPtr parse_macro() {
    auto s = make<Stmt>(Stmt::Kind::Macro);
    next();
    s->macro = std::make_shared<MacroDef>();
    s->macro->name = expect_name();
    parse_signature(*s->macro);
    expect(TokenType::BlockEnd, "end of statement block");
    const int saved_loops = loop_depth_;
    loop_depth_ = 0;  // a macro body is a function: break/continue cannot reach an outer loop
    s->macro->body = subparse({"endmacro"});
    loop_depth_ = saved_loops;
    next();
    scan_body(s->macro->body, *s->macro);
    return s;
  }

  StmtPtr parse_call_block() {
    auto s = make<Stmt>(Stmt::Kind::CallBlock);
    next();
    s->macro = std::make_shared<MacroDef>();
    s->macro->name = "caller";
    if (is_op("(")) parse_signature(*s->macro);
    s->expr = parse_expression(true);
    if (s->expr->kind != Expr::Kind::Call) fail_here("expected call");
    expect(TokenType::BlockEnd, "end of statement block");
    s->macro->body = subparse({"endcall"});
    next();
    scan_body(s->macro->body, *s->macro);
    return s;
  }

  StmtPtr parse_filter_block() {
    auto s = make<Stmt>(Stmt::Kind::FilterBlock);
    next();
    s->expr = parse_filter(nullptr, true);
    expect(TokenType::BlockEnd, "end of statement block");
    s->body = subparse({"endfilter"});
    next();
    return s;
  }

  StmtPtr parse_with() {
    auto s = make<Stmt>(Stmt::Kind::With);
    next();
    while (cur().type != TokenType::BlockEnd) {
      if (!s->assignments.empty()) expect_op(",");
      Target t = parse_assign_target(false, false, {});
      expect_op("=");
      s->assignments.emplace_back(std::move(t), parse_expression(true));
    }
    expect(TokenType::BlockEnd, "end of statement block");
    s->body = subparse({"endwith"});
    next();
    return s;
  }

  Target parse_assign_target(bool with_tuple, bool with_namespace, const std::set<std::string>& extra_end) {
    if (with_namespace && cur().type == TokenType::Name && look().type == TokenType::Operator && look().value == ".") {
      Target t;
      t.kind = Target::Kind::NsAttr;
      t.name = expect_name();
      next();  // .
      t.attr = expect_name();
      return t;
    }
    ExprPtr e = with_tuple ? parse_tuple(true, false, extra_end, false) : parse_primary();
    return to_target(*e);
  }

  Target to_target(const Expr& e) {
    Target t;
    if (e.kind == Expr::Kind::Name) {
      if (e.name == "true" || e.name == "false" || e.name == "none" || e.name == "True" || e.name == "False" || e.name == "None") {
        fail_here("can't assign to '" + e.name + "'");
      }
      t.kind = Target::Kind::Name;
      t.name = e.name;
      return t;
    }
    if (e.kind == Expr::Kind::Tuple) {
      t.kind = Target::Kind::Tuple;
      for (const auto& a : e.args) t.items.push_back(to_target(*a));
      return t;
    }
    fail_here("can't assign to this expression");
  }

  // ---- expressions --------------------------------------------------------------------------
  bool is_tuple_end(const std::set<std::string>& extra_end) const {
    const Token& t = cur();
    if (t.type == TokenType::VarEnd || t.type == TokenType::BlockEnd || t.type == TokenType::End) return true;
    if (t.type == TokenType::Operator && t.value == ")") return true;
    return t.type == TokenType::Name && extra_end.count(t.value);
  }

  ExprPtr parse_tuple(bool simplified, bool with_condexpr, const std::set<std::string>& extra_end, bool explicit_parens) {
    const int line = cur().line;
    std::vector<ExprPtr> args;
    bool is_tuple = false;
    while (true) {
      if (!args.empty()) expect_op(",");
      if (is_tuple_end(extra_end)) break;
      args.push_back(simplified ? parse_primary() : parse_expression(with_condexpr));
      if (is_op(",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (!args.empty()) return std::move(args[0]);
      if (!explicit_parens) fail_here("Expected an expression, got '" + describe(cur()) + "'");
    }
    auto t = std::make_unique<Expr>(Expr::Kind::Tuple, line);
    t->args = std::move(args);
    return t;
  }

  ExprPtr parse_expression(bool with_condexpr) { return with_condexpr ? parse_condexpr() : parse_or(); }

  ExprPtr parse_condexpr() {
    DepthGuard guard(*this);
    ExprPtr e1 = parse_or();
    while (is_name("if")) {
      const int line = cur().line;
      next();
      ExprPtr e2 = parse_or();
      ExprPtr e3;
      if (skip_name("else")) e3 = parse_condexpr();
      auto c = std::make_unique<Expr>(Expr::Kind::CondExpr, line);
      c->args.push_back(std::move(e2));
      c->args.push_back(std::move(e1));
      c->args.push_back(std::move(e3));
      e1 = std::move(c);
    }
    return e1;
  }

  ExprPtr binary(Expr::Kind k, ExprPtr a, ExprPtr b, int line, std::string op = {}) {
    auto e = std::make_unique<Expr>(k, line);
    e->name = std::move(op);
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (is_name("or")) {
      const int line = cur().line;
      next();
      left = binary(Expr::Kind::Or, std::move(left), parse_and(), line);
    }
    return left;
  }
  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (is_name("and")) {
      const int line = cur().line;
      next();
      left = binary(Expr::Kind::And, std::move(left), parse_not(), line);
    }
    return left;
  }
  ExprPtr parse_not() {
    if (is_name("not")) {
      DepthGuard guard(*this);
      auto e = make<Expr>(Expr::Kind::Not);
      next();
      e->args.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }
  ExprPtr parse_compare() {
    const int line = cur().line;
    ExprPtr first = parse_math1();
    std::vector<std::string> ops;
    std::vector<ExprPtr> operands;
    while (true) {
      if (cur().type == TokenType::Operator &&
          (cur().value == "==" || cur().value == "!=" || cur().value == "<" || cur().value == "<=" || cur().value == ">" ||
           cur().value == ">=")) {
        ops.push_back(cur().value);
        next();
      } else if (is_name("in")) {
        ops.push_back("in");
        next();
      } else if (is_name("not") && look().type == TokenType::Name && look().value == "in") {
        ops.push_back("notin");
        next();
        next();
      } else {
        break;
      }
      operands.push_back(parse_math1());
    }
    if (ops.empty()) return first;
    auto e = std::make_unique<Expr>(Expr::Kind::Compare, line);
    e->args.push_back(std::move(first));
    for (auto& o : operands) e->args.push_back(std::move(o));
    e->ops = std::move(ops);
    return e;
  }
  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      const std::string op = cur().value;
      const int line = cur().line;
      next();
      left = binary(Expr::Kind::Binary, std::move(left), parse_concat(), line, op);
    }
    return left;
  }
  ExprPtr parse_concat() {
    const int line = cur().line;
    std::vector<ExprPtr> args;
    args.push_back(parse_math2());
    while (skip_op("~")) args.push_back(parse_math2());
    if (args.size() == 1) return std::move(args[0]);
    auto e = std::make_unique<Expr>(Expr::Kind::Concat, line);
    e->args = std::move(args);
    return e;
  }
  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const std::string op = cur().value;
      const int line = cur().line;
      next();
      left = binary(Expr::Kind::Binary, std::move(left), parse_pow(), line, op);
    }
    return left;
  }
  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (is_op("**")) {
      const int line = cur().line;
      next();
      left = binary(Expr::Kind::Binary, std::move(left), parse_unary(true), line, "**");
    }
    return left;
  }
  ExprPtr parse_unary(bool with_filter) {
    DepthGuard guard(*this);
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      auto e = make<Expr>(is_op("-") ? Expr::Kind::Neg : Expr::Kind::Pos);
      next();
      e->args.push_back(parse_unary(false));
      node = std::move(e);
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    DepthGuard guard(*this);
    const Token& t = cur();
    const int line = t.line;
    if (t.type == TokenType::Name) {
      auto e = std::make_unique<Expr>(Expr::Kind::Const, line);
      if (t.value == "true" || t.value == "True") {
        e->value = Value::boolean(true);
      } else if (t.value == "false" || t.value == "False") {
        e->value = Value::boolean(false);
      } else if (t.value == "none" || t.value == "None") {
        e->value = Value::none();
      } else {
        e->kind = Expr::Kind::Name;
        e->name = t.value;
      }
      next();
      return e;
    }
    if (t.type == TokenType::String) {
      std::string s;
      while (cur().type == TokenType::String) {
        s += cur().value;
        next();
      }
      auto e = std::make_unique<Expr>(Expr::Kind::Const, line);
      e->value = Value::string(std::move(s));
      return e;
    }
    if (t.type == TokenType::Integer) {
      auto e = std::make_unique<Expr>(Expr::Kind::Const, line);
      int64_t v = 0;
      const auto res = std::from_chars(t.value.data(), t.value.data() + t.value.size(), v);
      if (res.ec != std::errc()) fail_here("integer literal " + t.value + " is out of range");
      e->value = Value::integer(v);
      next();
      return e;
    }
    if (t.type == TokenType::Float) {
      auto e = std::make_unique<Expr>(Expr::Kind::Const, line);
      e->value = Value::floating(std::strtod(t.value.c_str(), nullptr));
      next();
      return e;
    }
    if (is_op("(")) {
      next();
      ExprPtr e = parse_tuple(false, true, {}, true);
      expect_op(")");
      return e;
    }
    if (is_op("[")) {
      next();
      auto e = std::make_unique<Expr>(Expr::Kind::List, line);
      while (!is_op("]")) {
        if (!e->args.empty()) expect_op(",");
        if (is_op("]")) break;
        e->args.push_back(parse_expression(true));
      }
      expect_op("]");
      return e;
    }
    if (is_op("{")) {
      next();
      auto e = std::make_unique<Expr>(Expr::Kind::Dict, line);
      while (!is_op("}")) {
        if (!e->args.empty()) expect_op(",");
        if (is_op("}")) break;
        e->args.push_back(parse_expression(true));
        expect_op(":");
        e->args.push_back(parse_expression(true));
      }
      expect_op("}");
      return e;
    }
    fail_here("unexpected '" + describe(t) + "'");
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      if (is_op(".") || is_op("[")) {
        node = parse_subscript(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr node) {
    const int line = cur().line;
    if (skip_op(".")) {
      const Token& a = cur();
      if (a.type == TokenType::Name) {
        auto e = std::make_unique<Expr>(Expr::Kind::GetAttr, line);
        e->name = a.value;
        e->args.push_back(std::move(node));
        next();
        return e;
      }
      if (a.type == TokenType::Integer) {
        auto idx = std::make_unique<Expr>(Expr::Kind::Const, line);
        int64_t v = 0;
        std::from_chars(a.value.data(), a.value.data() + a.value.size(), v);
        idx->value = Value::integer(v);
        next();
        auto e = std::make_unique<Expr>(Expr::Kind::GetItem, line);
        e->args.push_back(std::move(node));
        e->args.push_back(std::move(idx));
        return e;
      }
      fail_here("expected name or number");
    }
    expect_op("[");
    std::vector<ExprPtr> args;
    while (!is_op("]")) {
      if (!args.empty()) expect_op(",");
      args.push_back(parse_subscribed());
    }
    expect_op("]");
    auto e = std::make_unique<Expr>(Expr::Kind::GetItem, line);
    e->args.push_back(std::move(node));
    if (args.size() == 1) {
      e->args.push_back(std::move(args[0]));
    } else {
      auto t = std::make_unique<Expr>(Expr::Kind::Tuple, line);
      t->args = std::move(args);
      e->args.push_back(std::move(t));
    }
    return e;
  }

  ExprPtr parse_subscribed() {
    const int line = cur().line;
    std::vector<ExprPtr> args;
    if (is_op(":")) {
      next();
      args.push_back(nullptr);
    } else {
      ExprPtr node = parse_expression(true);
      if (!is_op(":")) return node;
      next();
      args.push_back(std::move(node));
    }
    if (is_op(":")) {
      args.push_back(nullptr);
    } else if (!is_op("]") && !is_op(",")) {
      args.push_back(parse_expression(true));
    } else {
      args.push_back(nullptr);
    }
    if (is_op(":")) {
      next();
      if (!is_op("]") && !is_op(",")) {
        args.push_back(parse_expression(true));
      } else {
        args.push_back(nullptr);
      }
    } else {
      args.push_back(nullptr);
    }
    auto e = std::make_unique<Expr>(Expr::Kind::Slice, line);
    e->args = std::move(args);
    return e;
  }

  void parse_call_args(Expr& e) {
    expect_op("(");
    bool require_comma = false;
    while (!is_op(")")) {
      if (require_comma) {
        expect_op(",");
        if (is_op(")")) break;
      }
      if (is_op("*")) {
        if (e.dyn_args || e.dyn_kwargs) fail_here("invalid syntax for function call expression");
        next();
        e.dyn_args = parse_expression(true);
      } else if (is_op("**")) {
        if (e.dyn_kwargs) fail_here("invalid syntax for function call expression");
        next();
        e.dyn_kwargs = parse_expression(true);
      } else if (cur().type == TokenType::Name && look().type == TokenType::Operator && look().value == "=") {
        if (e.dyn_kwargs) fail_here("invalid syntax for function call expression");
        std::string key = cur().value;
        next();
        next();
        e.call_kwargs.emplace_back(std::move(key), parse_expression(true));
      } else {
        if (e.dyn_args || e.dyn_kwargs || !e.call_kwargs.empty()) fail_here("invalid syntax for function call expression");
        e.call_args.push_back(parse_expression(true));
      }
      require_comma = true;
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr node) {
    auto e = make<Expr>(Expr::Kind::Call);
    e->args.push_back(std::move(node));
    parse_call_args(*e);
    return e;
  }

  ExprPtr parse_filter(ExprPtr node, bool start_inline) {
    while (is_op("|") || start_inline) {
      if (!start_inline) next();
      start_inline = false;
      const int line = cur().line;
      std::string name = expect_name();
      while (is_op(".")) {
        next();
        name += "." + expect_name();
      }
      if (!is_known_filter(name)) fail_here("No filter named '" + name + "'.");
      auto e = std::make_unique<Expr>(Expr::Kind::Filter, line);
      e->name = name;
      e->args.push_back(std::move(node));
      if (is_op("(")) parse_call_args(*e);
      node = std::move(e);
    }
    return node;
  }

  ExprPtr parse_test(ExprPtr node) {
    const int line = cur().line;
    next();  // is
    const bool negated = skip_name("not");
    std::string name = expect_name();
    while (is_op(".")) {
      next();
      name += "." + expect_name();
    }
    if (!is_known_test(name)) fail_here("No test named '" + name + "'.");
    auto e = std::make_unique<Expr>(Expr::Kind::Test, line);
    e->name = name;
    e->args.push_back(std::move(node));
    if (is_op("(")) {
      parse_call_args(*e);
    } else if ((cur().type == TokenType::Name || cur().type == TokenType::String || cur().type == TokenType::Integer ||
                cur().type == TokenType::Float || is_op("(") || is_op("[") || is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
      if (is_name("is")) fail_here("You cannot chain multiple tests with is");
      e->call_args.push_back(parse_postfix(parse_primary()));
    }
    if (!negated) return e;
    auto n = std::make_unique<Expr>(Expr::Kind::Not, line);
    n->args.push_back(std::move(e));
    return n;
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (is_op("|")) {
        node = parse_filter(std::move(node), false);
      } else if (is_name("is")) {
        node = parse_test(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  std::vector<Token> toks_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

Body parse(std::string_view source) { return Parser(lex(source)).parse_template(); }

}  // namespace specserve::chat::jinja
