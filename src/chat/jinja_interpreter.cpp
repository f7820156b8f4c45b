#include "chat/jinja_interpreter.h"

#include <cmath>

#include "chat/jinja_builtin_util.h"
#include "chat/jinja_builtins.h"
#include "chat/py_text.h"
#include "core/error.h"

namespace specserve::chat::jinja {

namespace {

// An error that already carries its template line.
class LocatedError : public Error {
 public:
  using Error::Error;
};

class MacroCallable final : public Callable {
 public:
  // The defining frame is held weakly: it owns this macro's value, so a strong reference would
  // make a cycle. A macro that outlives its frame (stored away and called later) resolves names
  // in the template's root frame instead.
  MacroCallable(std::shared_ptr<const MacroDef> def, const std::shared_ptr<Frame>& closure,
                Value caller = Value::undefined("'caller' is undefined"))
      : def_(std::move(def)), closure_(closure), caller_(std::move(caller)) {}

  std::string name() const override { return def_->name; }

  Value call(Interpreter& interp, CallArgs args) override {
    if (++interp.call_depth() > interp.limits().max_call_depth) {
      --interp.call_depth();
      template_error("maximum macro recursion depth exceeded");
    }
    struct Restore {
      Interpreter& i;
      ~Restore() { --i.call_depth(); }
    } restore{interp};

    std::shared_ptr<Frame> parent = closure_.lock();
    if (!parent) parent = interp.root_frame();
    auto frame = std::make_shared<Frame>(parent);
    const auto& params = def_->params;
    const size_t n_required = params.size() - def_->defaults.size();
    std::vector<Value> varargs;
    for (size_t i = 0; i < args.positional.size(); ++i) {
      if (i < params.size()) {
        frame->set(params[i], args.positional[i]);
      } else if (def_->uses_varargs) {
        varargs.push_back(args.positional[i]);
      } else {
        template_error("macro '" + def_->name + "' takes not more than " + std::to_string(params.size()) +
                       " argument(s)");
      }
    }
    Dict kwargs;
    std::vector<bool> taken(args.keyword.size(), false);
    for (size_t i = args.positional.size(); i < params.size(); ++i) {
      bool found = false;
      for (size_t k = 0; k < args.keyword.size(); ++k) {
        if (!taken[k] && args.keyword[k].first == params[i]) {
          frame->set(params[i], args.keyword[k].second);
          taken[k] = true;
          found = true;
          break;
        }
      }
      if (found) continue;
      if (i >= n_required) {
        frame->set(params[i], interp.eval(*def_->defaults[i - n_required], frame));
      } else {
        frame->set(params[i], Value::undefined("parameter '" + params[i] + "' was not provided"));
      }
    }
    Value caller = caller_;
    for (size_t k = 0; k < args.keyword.size(); ++k) {
      if (taken[k]) continue;
      const auto& [key, val] = args.keyword[k];
      if (key == "caller" && def_->uses_caller) {
        caller = val;
      } else if (def_->uses_kwargs) {
        kwargs.set(Value::string(key), val);
      } else {
        template_error("macro '" + def_->name + "' takes no keyword argument '" + key + "'");
      }
    }
    if (def_->uses_varargs) frame->set("varargs", Value::tuple(std::move(varargs)));
    if (def_->uses_kwargs) frame->set("kwargs", Value::dict(std::move(kwargs)));
    if (def_->uses_caller) frame->set("caller", caller);
    return Value::string(interp.render_body(def_->body, frame));
  }

 private:
  std::shared_ptr<const MacroDef> def_;
  std::weak_ptr<Frame> closure_;
  Value caller_;
};

// Python slicing of a sequence of n elements.
std::vector<size_t> slice_indices(size_t n, const Value& start, const Value& stop, const Value& step) {
  auto as_index = [](const Value& v, const char* what) -> int64_t {
    if (!v.is_int() && !v.is_bool()) template_error(std::string("slice ") + what + " must be an integer or None");
    return v.as_int();
  };
  const int64_t len = static_cast<int64_t>(n);
  const int64_t st = (step.is_none() || step.is_undefined()) ? 1 : as_index(step, "step");
  if (st == 0) template_error("slice step cannot be zero");
  auto clamp = [&](const Value& v, int64_t dflt, bool is_start) -> int64_t {
    if (v.is_none() || v.is_undefined()) return dflt;
    int64_t x = as_index(v, is_start ? "start" : "stop");
    if (x < 0) x += len;
    if (st > 0) return std::clamp<int64_t>(x, 0, len);
    return std::clamp<int64_t>(x, -1, len - 1);
  };
  const int64_t b = clamp(start, st > 0 ? 0 : len - 1, true);
  const int64_t e = clamp(stop, st > 0 ? len : -1, false);
  std::vector<size_t> out;
  if (st > 0) {
    for (int64_t i = b; i < e; i += st) out.push_back(static_cast<size_t>(i));
  } else {
    for (int64_t i = b; i > e; i += st) out.push_back(static_cast<size_t>(i));
  }
  return out;
}

Value do_slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_string()) {
    const auto cps = py::code_points(obj.str());
    std::string out;
    for (size_t i : slice_indices(cps.size(), start, stop, step)) py::append_utf8(out, cps[i]);
    return Value::string(std::move(out), obj.is_safe());
  }
  if (obj.is_sequence_like()) {
    std::vector<Value> out;
    for (size_t i : slice_indices(obj.items().size(), start, stop, step)) out.push_back(obj.items()[i]);
    return obj.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
  }
  if (obj.is_undefined()) template_error("'" + obj.str() + "' is undefined");
  return Value::undefined("slice of " + obj.type_name());
}

}  // namespace

void template_error(const std::string& message) { throw Error(message); }

const Value* Frame::lookup(const std::string& name) const {
  for (const Frame* f = this; f; f = f->parent_.get()) {
    auto it = f->vars_.find(name);
    if (it != f->vars_.end()) return &it->second;
  }
  return nullptr;
}

void Interpreter::check_size(size_t bytes) const {
  if (bytes > limits_.max_output_bytes)
    template_error("output exceeds the limit of " + std::to_string(limits_.max_output_bytes) + " bytes");
}

void Interpreter::step() {
  if (++steps_ > limits_.max_steps)
    template_error("template exceeded its evaluation budget (infinite or very long loop?)");
}

CallArgs Interpreter::eval_args(const Expr& e, const std::shared_ptr<Frame>& frame, size_t first_arg) {
  CallArgs args;
  for (size_t i = first_arg; i < e.call_args.size(); ++i) args.positional.push_back(eval(*e.call_args[i], frame));
  for (const auto& [k, v] : e.call_kwargs) args.keyword.emplace_back(k, eval(*v, frame));
  if (e.dyn_args) {
    for (auto& v : iterate(eval(*e.dyn_args, frame))) args.positional.push_back(std::move(v));
  }
  if (e.dyn_kwargs) {
    const Value d = eval(*e.dyn_kwargs, frame);
    if (!d.is_dict()) template_error("argument after ** must be a mapping");
    for (const auto& [k, v] : d.dict().items) args.keyword.emplace_back(to_str(k), v);
  }
  return args;
}

Value Interpreter::call(const Value& callee, CallArgs args, int line) {
  if (callee.is_undefined()) template_error(undefined_message(callee));
  if (!callee.is_callable()) template_error("'" + callee.type_name() + "' object is not callable");
  return callee.callable_ptr()->call(*this, std::move(args));
}

Value Interpreter::eval(const Expr& e, const std::shared_ptr<Frame>& frame) {
  step();
  switch (e.kind) {
    case Expr::Kind::Const: return e.value;
    case Expr::Kind::Name: {
      if (const Value* v = frame->lookup(e.name)) return *v;
      return Value::undefined(e.name);
    }
    case Expr::Kind::List:
    case Expr::Kind::Tuple: {
      std::vector<Value> items;
      items.reserve(e.args.size());
      for (const auto& a : e.args) items.push_back(eval(*a, frame));
      return e.kind == Expr::Kind::List ? Value::list(std::move(items)) : Value::tuple(std::move(items));
    }
    case Expr::Kind::Dict: {
      Dict d;
      for (size_t i = 0; i + 1 < e.args.size(); i += 2) d.set(eval(*e.args[i], frame), eval(*e.args[i + 1], frame));
      return Value::dict(std::move(d));
    }
    case Expr::Kind::GetAttr: return get_attr(eval(*e.args[0], frame), e.name);
    case Expr::Kind::GetItem: {
      const Value obj = eval(*e.args[0], frame);
      const Expr& key = *e.args[1];
      if (key.kind == Expr::Kind::Slice) {
        auto part = [&](size_t i) { return key.args[i] ? eval(*key.args[i], frame) : Value::none(); };
        const Value start = part(0), stop = part(1), stp = part(2);
        return do_slice(obj, start, stop, stp);
      }
      return get_item(obj, eval(key, frame));
    }
    case Expr::Kind::Slice: template_error("slice outside of a subscript");
    case Expr::Kind::Call: {
      const Value callee = eval(*e.args[0], frame);
      return call(callee, eval_args(e, frame, 0), e.line);
    }
    case Expr::Kind::Filter: {
      const Value v = e.args[0] ? eval(*e.args[0], frame) : Value::undefined();
      return apply_filter(*this, e.name, v, eval_args(e, frame, 0));
    }
    case Expr::Kind::Test:
      return Value::boolean(apply_test(*this, e.name, eval(*e.args[0], frame), eval_args(e, frame, 0)));
    case Expr::Kind::Neg:
    case Expr::Kind::Pos: {
      const Value v = eval(*e.args[0], frame);
      if (v.is_undefined()) template_error(undefined_message(v));
      if (!v.is_number())
        template_error("bad operand type for unary " + std::string(e.kind == Expr::Kind::Neg ? "-" : "+") + ": '" +
                       v.type_name() + "'");
      if (e.kind == Expr::Kind::Pos) return v.is_bool() ? Value::integer(v.as_int()) : v;
      if (v.is_float()) return Value::floating(-v.as_double());
      if (v.as_int() == INT64_MIN) template_error("integer overflow");
      return Value::integer(-v.as_int());
    }
    case Expr::Kind::Not: return Value::boolean(!truthy(eval(*e.args[0], frame)));
    case Expr::Kind::Binary: return binary_op(e.name, eval(*e.args[0], frame), eval(*e.args[1], frame), *this);
    case Expr::Kind::Concat: {
      std::string out;
      for (const auto& a : e.args) {
        out += to_str(eval(*a, frame));
        check_size(out.size());
      }
      return Value::string(std::move(out));
    }
    case Expr::Kind::And: {
      Value l = eval(*e.args[0], frame);
      return truthy(l) ? eval(*e.args[1], frame) : l;
    }
    case Expr::Kind::Or: {
      Value l = eval(*e.args[0], frame);
      return truthy(l) ? l : eval(*e.args[1], frame);
    }
    case Expr::Kind::Compare: {
      Value left = eval(*e.args[0], frame);
      for (size_t i = 0; i < e.ops.size(); ++i) {
        Value right = eval(*e.args[i + 1], frame);
        const std::string& op = e.ops[i];
        bool ok;
        if (op == "==") {
          ok = equals(left, right);
        } else if (op == "!=") {
          ok = !equals(left, right);
        } else if (op == "in") {
          ok = contains(right, left);
        } else if (op == "notin") {
          ok = !contains(right, left);
        } else {
          if (left.is_undefined()) template_error(undefined_message(left));
          if (right.is_undefined()) template_error(undefined_message(right));
          if (op == "<") {
            ok = less_than(left, right);
          } else if (op == ">") {
            ok = less_than(right, left);
          } else if (op == "<=") {
            ok = !less_than(right, left);
          } else {
            ok = !less_than(left, right);
          }
        }
        if (!ok) return Value::boolean(false);
        left = std::move(right);
      }
      return Value::boolean(true);
    }
    case Expr::Kind::CondExpr: {
      if (truthy(eval(*e.args[0], frame))) return eval(*e.args[1], frame);
      if (e.args[2]) return eval(*e.args[2], frame);
      return Value::undefined("the inline if-expression evaluated to false and no else section was defined");
    }
  }
  template_error("unknown expression");
}

void Interpreter::assign(const Target& t, const Value& v, const std::shared_ptr<Frame>& frame, int line) {
  switch (t.kind) {
    case Target::Kind::Name: frame->set(t.name, v); return;
    case Target::Kind::Tuple: {
      const std::vector<Value> items = iterate(v);
      if (items.size() != t.items.size()) {
        template_error(items.size() < t.items.size()
                           ? "not enough values to unpack (expected " + std::to_string(t.items.size()) + ", got " +
                                 std::to_string(items.size()) + ")"
                           : "too many values to unpack (expected " + std::to_string(t.items.size()) + ")");
      }
      for (size_t i = 0; i < items.size(); ++i) assign(t.items[i], items[i], frame, line);
      return;
    }
    case Target::Kind::NsAttr: {
      const Value* ns = frame->lookup(t.name);
      if (!ns || !ns->is_namespace()) template_error("cannot assign attribute on non-namespace object");
      ns->namespace_ptr()->attrs.set(Value::string(t.attr), v);
      return;
    }
  }
}

std::string Interpreter::render_body(const Body& body, const std::shared_ptr<Frame>& frame) {
  std::string out;
  exec(body, frame, out);
  return out;
}

Interpreter::Flow Interpreter::exec(const Body& body, const std::shared_ptr<Frame>& frame, std::string& out) {
  for (const auto& s : body) {
    Flow f;
    try {
      f = exec_stmt(*s, frame, out);
    } catch (const LocatedError&) {
      throw;
    } catch (const Error& err) {
      throw LocatedError("line " + std::to_string(s->line) + ": " + err.what());
    }
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

Interpreter::Flow Interpreter::exec_for(const Stmt& s, const std::shared_ptr<Frame>& frame, std::string& out) {
  std::vector<Value> items = iterate(eval(*s.expr, frame));
  if (s.cond) {
    // The loop filter sees each item in its own frame; loop.* then counts only kept items.
    std::vector<Value> kept;
    for (auto& item : items) {
      auto f = std::make_shared<Frame>(frame);
      assign(s.target, item, f, s.line);
      if (truthy(eval(*s.cond, f))) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    if (!s.else_body.empty()) return exec(s.else_body, std::make_shared<Frame>(frame), out);
    return Flow::Normal;
  }
  auto state = std::make_shared<LoopState>();
  state->items = std::move(items);
  const Value loop = Value::loop(state);
  for (size_t i = 0; i < state->items.size(); ++i) {
    step();
    state->index = i;
    auto f = std::make_shared<Frame>(frame);
    f->set("loop", loop);
    assign(s.target, state->items[i], f, s.line);
    const Flow flow = exec(s.body, f, out);
    if (flow == Flow::Break) break;
  }
  return Flow::Normal;
}

Interpreter::Flow Interpreter::exec_stmt(const Stmt& s, const std::shared_ptr<Frame>& frame, std::string& out) {
  step();
  switch (s.kind) {
    case Stmt::Kind::Output: out += s.text; break;
    case Stmt::Kind::Print: out += to_str(eval(*s.expr, frame)); break;
    case Stmt::Kind::If:
      for (size_t i = 0; i < s.tests.size(); ++i) {
        if (truthy(eval(*s.tests[i], frame))) return exec(s.bodies[i], frame, out);
      }
      return exec(s.else_body, frame, out);
    case Stmt::Kind::For: return exec_for(s, frame, out);
    case Stmt::Kind::Set: assign(s.target, eval(*s.expr, frame), frame, s.line); break;
    case Stmt::Kind::SetBlock: {
      std::string text;
      exec(s.body, std::make_shared<Frame>(frame), text);
      Value v = Value::string(std::move(text));
      if (s.expr) {
        // The filter chain was parsed with an empty input slot (args[0] of the innermost filter).
        std::vector<const Expr*> chain;
        for (const Expr* f = s.expr.get(); f; f = f->args[0].get()) chain.push_back(f);
        for (auto it = chain.rbegin(); it != chain.rend(); ++it)
          v = apply_filter(*this, (*it)->name, v, eval_args(**it, frame, 0));
      }
      assign(s.target, v, frame, s.line);
      break;
    }
    case Stmt::Kind::Macro:
      frame->set(s.macro->name, Value::callable(std::make_shared<MacroCallable>(s.macro, frame)));
      break;
    case Stmt::Kind::CallBlock: {
      const Value caller = Value::callable(std::make_shared<MacroCallable>(s.macro, frame));
      const Expr& call_expr = *s.expr;
      const Value callee = eval(*call_expr.args[0], frame);
      CallArgs args = eval_args(call_expr, frame, 0);
      args.keyword.emplace_back("caller", caller);
      out += to_str(call(callee, std::move(args), s.line));
      break;
    }
    case Stmt::Kind::FilterBlock: {
      std::string text;
      exec(s.body, std::make_shared<Frame>(frame), text);
      Value v = Value::string(std::move(text));
      std::vector<const Expr*> chain;
      for (const Expr* f = s.expr.get(); f; f = f->args[0].get()) chain.push_back(f);
      for (auto it = chain.rbegin(); it != chain.rend(); ++it)
        v = apply_filter(*this, (*it)->name, v, eval_args(**it, frame, 0));
      out += to_str(v);
      break;
    }
    case Stmt::Kind::With: {
      auto f = std::make_shared<Frame>(frame);
      for (const auto& [target, expr] : s.assignments) assign(target, eval(*expr, frame), f, s.line);
      return exec(s.body, f, out);
    }
    case Stmt::Kind::Break: return Flow::Break;
    case Stmt::Kind::Continue: return Flow::Continue;
    case Stmt::Kind::Scope: return exec(s.body, frame, out);
  }
  check_size(out.size());
  return Flow::Normal;
}

std::string Interpreter::render(const Body& body, const Dict& context) {
  Dict globals;
  add_globals(globals);
  globals_ = std::make_shared<Frame>(nullptr);
  for (const auto& [k, v] : globals.items) globals_->set(k.str(), v);
  root_ = std::make_shared<Frame>(globals_);
  for (const auto& [k, v] : context.items) root_->set(to_str(k), v);
  // Namespaces are the only mutable objects, so every reference cycle a template can build goes
  // through one; emptying them after the render frees everything.
  struct BreakCycles {
    Interpreter& i;
    ~BreakCycles() {
      for (auto& ns : i.namespaces_) ns->attrs = Dict{};
      i.namespaces_.clear();
      i.root_.reset();
      i.globals_.reset();
    }
  } break_cycles{*this};
  std::string out;
  try {
    exec(body, root_, out);
  } catch (const LocatedError& e) {
    throw Error(std::string("chat template error: ") + e.what());
  } catch (const Error& e) {
    throw Error(std::string("chat template error: ") + e.what());
  }
  return out;
}

}  // namespace specserve::chat::jinja
