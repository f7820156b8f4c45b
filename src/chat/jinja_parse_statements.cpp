// The Jinja parser's statements: the template body, for / if / set / macro / call / filter / with and assignment
// targets.
#include <charconv>
#include <set>

#include "chat/jinja_builtins.h"
#include "chat/jinja_parser_impl.h"

namespace specserve::chat::jinja {

// Parses until a block tag whose name is in `ends` (left unconsumed, positioned on the name).
Body Parser::subparse(const std::set<std::string>& ends) {
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

StmtPtr Parser::parse_statement() {
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

StmtPtr Parser::parse_for() {
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

StmtPtr Parser::parse_if() {
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

StmtPtr Parser::parse_set() {
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

void Parser::parse_signature(MacroDef& m) {
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

void Parser::scan_names(const Expr* e, MacroDef& m) {
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

void Parser::scan_body(const Body& body, MacroDef& m) {
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

StmtPtr Parser::parse_macro() {
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

StmtPtr Parser::parse_call_block() {
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

StmtPtr Parser::parse_filter_block() {
  auto s = make<Stmt>(Stmt::Kind::FilterBlock);
  next();
  s->expr = parse_filter(nullptr, true);
  expect(TokenType::BlockEnd, "end of statement block");
  s->body = subparse({"endfilter"});
  next();
  return s;
}

StmtPtr Parser::parse_with() {
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

Target Parser::parse_assign_target(bool with_tuple, bool with_namespace, const std::set<std::string>& extra_end) {
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

Target Parser::to_target(const Expr& e) {
  Target t;
  if (e.kind == Expr::Kind::Name) {
    if (e.name == "true" || e.name == "false" || e.name == "none" || e.name == "True" || e.name == "False" ||
        e.name == "None") {
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

}  // namespace specserve::chat::jinja
