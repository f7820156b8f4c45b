#pragma once
// Syntax tree of the Jinja subset: expressions and statements as Jinja2's parser builds them.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja_value.h"

namespace specserve::chat::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    Const,     // value
    Name,      // name
    List,      // args
    Tuple,     // args
    Dict,      // args: key, value, key, value, ...
    GetAttr,   // args[0].name
    GetItem,   // args[0][args[1]]
    Slice,     // args[0..2]: start, stop, step (nullptr when absent)
    Call,      // args[0](call_args...)
    Filter,    // args[0] | name(call_args...)
    Test,      // args[0] is name(call_args...)
    Neg,       // -args[0]
    Pos,       // +args[0]
    Not,       // not args[0]
    Binary,    // args[0] op args[1]: + - * / // % **
    Concat,    // args joined with ~
    And,       // args[0] and args[1]
    Or,        // args[0] or args[1]
    Compare,   // args[0] ops[0] args[1] ops[1] args[2] ...
    CondExpr,  // args[1] if args[0] else args[2] (args[2] may be nullptr)
  };
  Kind kind;
  int line = 0;
  Value value;
  std::string name;              // Name, attribute, filter / test name, binary operator
  std::vector<ExprPtr> args;     // operands
  std::vector<std::string> ops;  // Compare operators: == != < <= > >= in notin
  // Call / Filter / Test arguments (args[0] is the callee or the filtered / tested value).
  std::vector<ExprPtr> call_args;
  std::vector<std::pair<std::string, ExprPtr>> call_kwargs;
  ExprPtr dyn_args, dyn_kwargs;  // *args, **kwargs

  Expr(Kind k, int l) : kind(k), line(l) {}
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

// Assignment targets: a name, a tuple of names, or namespace.attr.
struct Target {
  enum class Kind { Name, Tuple, NsAttr } kind = Kind::Name;
  std::string name;           // Name; NsAttr: the namespace variable
  std::string attr;           // NsAttr
  std::vector<Target> items;  // Tuple
};

struct MacroDef {
  std::string name;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // for the last defaults.size() params
  Body body;
  bool uses_varargs = false, uses_kwargs = false, uses_caller = false;
};

struct Stmt {
  enum class Kind {
    Output,     // text
    Print,      // {{ expr }}
    If,         // tests[i] -> bodies[i]; else_body
    For,        // target in expr [if cond] body [else]
    Set,        // target = expr
    SetBlock,   // target = rendered body (optionally filtered)
    Macro,      // macro definition
    CallBlock,  // {% call macro(...) %} body {% endcall %}
    FilterBlock,
    With,
    Break,
    Continue,
    Scope,  // a plain body (e.g. the {% generation %} extension tag)
  };
  Kind kind;
  int line = 0;
  std::string text;                 // Output
  ExprPtr expr;                     // Print, For iterable, Set value, CallBlock call, FilterBlock filter
  ExprPtr cond;                     // For filter
  Target target;                    // For, Set, SetBlock
  std::vector<ExprPtr> tests;       // If
  std::vector<Body> bodies;         // If branches
  Body body;                        // For, SetBlock, CallBlock, FilterBlock, With, Scope
  Body else_body;                   // If, For
  std::shared_ptr<MacroDef> macro;  // Macro, CallBlock (the caller's parameters)
  std::vector<std::pair<Target, ExprPtr>> assignments;  // With

  Stmt(Kind k, int l) : kind(k), line(l) {}
};

}  // namespace specserve::chat::jinja
