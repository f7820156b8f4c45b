// The Jinja parser's expressions, in Jinja's precedence order: tuples, conditional expressions, or / and / not,
// comparisons, arithmetic, concatenation, unary, primaries, subscripts, calls, filters and tests.
#include <charconv>
#include <set>

#include "chat/jinja_builtins.h"
#include "chat/jinja_parser_impl.h"

namespace specserve::chat::jinja {

bool Parser::is_tuple_end(const std::set<std::string>& extra_end) const {
  const Token& t = cur();
  if (t.type == TokenType::VarEnd || t.type == TokenType::BlockEnd || t.type == TokenType::End) return true;
  if (t.type == TokenType::Operator && t.value == ")") return true;
  return t.type == TokenType::Name && extra_end.count(t.value);
}

ExprPtr Parser::parse_tuple(bool simplified, bool with_condexpr, const std::set<std::string>& extra_end,
                            bool explicit_parens) {
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

ExprPtr Parser::parse_condexpr() {
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

ExprPtr Parser::binary(Expr::Kind k, ExprPtr a, ExprPtr b, int line, std::string op) {
  auto e = std::make_unique<Expr>(k, line);
  e->name = std::move(op);
  e->args.push_back(std::move(a));
  e->args.push_back(std::move(b));
  return e;
}

ExprPtr Parser::parse_or() {
  ExprPtr left = parse_and();
  while (is_name("or")) {
    const int line = cur().line;
    next();
    left = binary(Expr::Kind::Or, std::move(left), parse_and(), line);
  }
  return left;
}

ExprPtr Parser::parse_and() {
  ExprPtr left = parse_not();
  while (is_name("and")) {
    const int line = cur().line;
    next();
    left = binary(Expr::Kind::And, std::move(left), parse_not(), line);
  }
  return left;
}

ExprPtr Parser::parse_not() {
  if (is_name("not")) {
    DepthGuard guard(*this);
    auto e = make<Expr>(Expr::Kind::Not);
    next();
    e->args.push_back(parse_not());
    return e;
  }
  return parse_compare();
}

ExprPtr Parser::parse_compare() {
  const int line = cur().line;
  ExprPtr first = parse_math1();
  std::vector<std::string> ops;
  std::vector<ExprPtr> operands;
  while (true) {
    if (cur().type == TokenType::Operator && (cur().value == "==" || cur().value == "!=" || cur().value == "<" ||
                                              cur().value == "<=" || cur().value == ">" || cur().value == ">=")) {
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

ExprPtr Parser::parse_math1() {
  ExprPtr left = parse_concat();
  while (is_op("+") || is_op("-")) {
    const std::string op = cur().value;
    const int line = cur().line;
    next();
    left = binary(Expr::Kind::Binary, std::move(left), parse_concat(), line, op);
  }
  return left;
}

ExprPtr Parser::parse_concat() {
  const int line = cur().line;
  std::vector<ExprPtr> args;
  args.push_back(parse_math2());
  while (skip_op("~")) args.push_back(parse_math2());
  if (args.size() == 1) return std::move(args[0]);
  auto e = std::make_unique<Expr>(Expr::Kind::Concat, line);
  e->args = std::move(args);
  return e;
}

ExprPtr Parser::parse_math2() {
  ExprPtr left = parse_pow();
  while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
    const std::string op = cur().value;
    const int line = cur().line;
    next();
    left = binary(Expr::Kind::Binary, std::move(left), parse_pow(), line, op);
  }
  return left;
}

ExprPtr Parser::parse_pow() {
  ExprPtr left = parse_unary(true);
  while (is_op("**")) {
    const int line = cur().line;
    next();
    left = binary(Expr::Kind::Binary, std::move(left), parse_unary(true), line, "**");
  }
  return left;
}

ExprPtr Parser::parse_unary(bool with_filter) {
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

ExprPtr Parser::parse_primary() {
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

ExprPtr Parser::parse_postfix(ExprPtr node) {
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

ExprPtr Parser::parse_subscript(ExprPtr node) {
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

ExprPtr Parser::parse_subscribed() {
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

void Parser::parse_call_args(Expr& e) {
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
      if (e.dyn_args || e.dyn_kwargs || !e.call_kwargs.empty())
        fail_here("invalid syntax for function call expression");
      e.call_args.push_back(parse_expression(true));
    }
    require_comma = true;
  }
  expect_op(")");
}

ExprPtr Parser::parse_call(ExprPtr node) {
  auto e = make<Expr>(Expr::Kind::Call);
  e->args.push_back(std::move(node));
  parse_call_args(*e);
  return e;
}

ExprPtr Parser::parse_filter(ExprPtr node, bool start_inline) {
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

ExprPtr Parser::parse_test(ExprPtr node) {
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

ExprPtr Parser::parse_filter_expr(ExprPtr node) {
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

}  // namespace specserve::chat::jinja
