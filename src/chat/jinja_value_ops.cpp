// Operations on template values shared by the interpreter and the builtins: attribute and item access
// (incl. the `loop` object's attributes), iteration, membership and the binary operators with Python's
// semantics (int64 overflow is an error, floor division and modulo, str/list repetition).
#include <cmath>

#include "chat/jinja_builtin_util.h"
#include "chat/jinja_builtins.h"
#include "chat/jinja_interpreter.h"
#include "chat/py_text.h"
#include "core/error.h"

namespace specserve::chat::jinja {

std::string undefined_message(const Value& v) {
  return v.str().empty() ? "value is undefined"
                         : (v.str().find(' ') == std::string::npos ? "'" + v.str() + "' is undefined" : v.str());
}

namespace {

Value loop_attr(const std::shared_ptr<LoopState>& l, const std::string& name);

class LoopMethod final : public Callable {
 public:
  LoopMethod(std::shared_ptr<LoopState> l, std::string m) : loop_(std::move(l)), method_(std::move(m)) {}
  std::string name() const override { return "loop." + method_; }
  Value call(Interpreter&, CallArgs args) override {
    if (method_ == "cycle") {
      if (args.positional.empty()) template_error("no items for cycling given");
      return args.positional[loop_->index % args.positional.size()];
    }
    // changed(*values): True when the values differ from the previous call's.
    const Value now = Value::tuple(args.positional);
    const bool changed = !loop_->has_changed || !equals(now, loop_->last_changed);
    loop_->last_changed = now;
    loop_->has_changed = true;
    return Value::boolean(changed);
  }

 private:
  std::shared_ptr<LoopState> loop_;
  std::string method_;
};

Value loop_attr(const std::shared_ptr<LoopState>& l, const std::string& name) {
  const auto n = static_cast<int64_t>(l->items.size());
  const auto i = static_cast<int64_t>(l->index);
  if (name == "index") return Value::integer(i + 1);
  if (name == "index0") return Value::integer(i);
  if (name == "revindex") return Value::integer(n - i);
  if (name == "revindex0") return Value::integer(n - i - 1);
  if (name == "first") return Value::boolean(i == 0);
  if (name == "last") return Value::boolean(i == n - 1);
  if (name == "length") return Value::integer(n);
  if (name == "depth") return Value::integer(1);
  if (name == "depth0") return Value::integer(0);
  if (name == "previtem")
    return i > 0 ? l->items[static_cast<size_t>(i - 1)] : Value::undefined("there is no previous item");
  if (name == "nextitem")
    return i + 1 < n ? l->items[static_cast<size_t>(i + 1)] : Value::undefined("there is no next item");
  if (name == "cycle" || name == "changed") return Value::callable(std::make_shared<LoopMethod>(l, name));
  return Value::undefined("loop has no attribute '" + name + "'");
}

}  // namespace

Value get_attr(const Value& obj, const std::string& name) {
  switch (obj.kind()) {
    case Value::Kind::Undefined: template_error(undefined_message(obj));
    case Value::Kind::Dict: {
      Value m = get_method(obj, name);
      if (!m.is_undefined()) return m;
      if (const Value* v = obj.dict().find(std::string_view(name))) return *v;
      return Value::undefined("'dict object' has no attribute '" + name + "'");
    }
    case Value::Kind::Namespace: {
      if (const Value* v = obj.namespace_ptr()->attrs.find(std::string_view(name))) return *v;
      return Value::undefined("'Namespace object' has no attribute '" + name + "'");
    }
    case Value::Kind::Loop: return loop_attr(obj.loop_ptr(), name);
    default: {
      Value m = get_method(obj, name);
      if (!m.is_undefined()) return m;
      return Value::undefined("'" + obj.type_name() + " object' has no attribute '" + name + "'");
    }
  }
}

Value get_item(const Value& obj, const Value& key) {
  switch (obj.kind()) {
    case Value::Kind::Undefined: template_error(undefined_message(obj));
    case Value::Kind::Dict: {
      if (const Value* v = obj.dict().find(key)) return *v;
      if (key.is_string()) {
        Value m = get_method(obj, key.str());
        if (!m.is_undefined()) return m;
      }
      return Value::undefined("'dict object' has no attribute " + to_repr(key));
    }
    case Value::Kind::Namespace:
      if (key.is_string()) return get_attr(obj, key.str());
      return Value::undefined("namespace item");
    case Value::Kind::List:
    case Value::Kind::Tuple:
    case Value::Kind::String: {
      if (key.is_int() || key.is_bool()) {
        int64_t i = key.as_int();
        if (obj.is_string()) {
          const auto cps = py::code_points(obj.str());
          const auto n = static_cast<int64_t>(cps.size());
          if (i < 0) i += n;
          if (i < 0 || i >= n) return Value::undefined("string index out of range");
          std::string s;
          py::append_utf8(s, cps[static_cast<size_t>(i)]);
          return Value::string(std::move(s), obj.is_safe());
        }
        const auto n = static_cast<int64_t>(obj.items().size());
        if (i < 0) i += n;
        if (i < 0 || i >= n)
          return Value::undefined(obj.type_name() + " object has no element " + std::to_string(key.as_int()));
        return obj.items()[static_cast<size_t>(i)];
      }
      if (key.is_string()) return get_attr(obj, key.str());
      return Value::undefined("bad index");
    }
    case Value::Kind::Loop:
      if (key.is_string()) return loop_attr(obj.loop_ptr(), key.str());
      return Value::undefined("loop item");
    default:
      if (key.is_string()) return get_attr(obj, key.str());
      return Value::undefined("'" + obj.type_name() + "' object is not subscriptable");
  }
}

std::vector<Value> iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return {};
    case Value::Kind::List:
    case Value::Kind::Tuple: return v.items();
    case Value::Kind::Dict: {
      std::vector<Value> keys;
      keys.reserve(v.dict().items.size());
      for (const auto& kv : v.dict().items) keys.push_back(kv.first);
      return keys;
    }
    case Value::Kind::String: {
      std::vector<Value> chars;
      for (uint32_t cp : py::code_points(v.str())) {
        std::string s;
        py::append_utf8(s, cp);
        chars.push_back(Value::string(std::move(s), v.is_safe()));
      }
      return chars;
    }
    default: template_error("'" + v.type_name() + "' object is not iterable");
  }
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::Undefined: return false;
    case Value::Kind::String:
      if (!item.is_string()) template_error("'in <string>' requires string as left operand, not " + item.type_name());
      return container.str().find(item.str()) != std::string::npos;
    case Value::Kind::List:
    case Value::Kind::Tuple:
      for (const auto& x : container.items()) {
        if (equals(x, item)) return true;
      }
      return false;
    case Value::Kind::Dict: return container.dict().find(item) != nullptr;
    case Value::Kind::Namespace:
      return item.is_string() && container.namespace_ptr()->attrs.find(std::string_view(item.str()));
    default: template_error("argument of type '" + container.type_name() + "' is not iterable");
  }
}

namespace {

// Python ints are unbounded; an int64 overflow is reported instead of wrapping.
int64_t add_checked(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) template_error("integer overflow");
  return r;
}
int64_t sub_checked(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_sub_overflow(a, b, &r)) template_error("integer overflow");
  return r;
}
int64_t mul_checked(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) template_error("integer overflow");
  return r;
}

int64_t floor_div(int64_t a, int64_t b) {
  if (b == 0) template_error("integer division or modulo by zero");
  if (a == INT64_MIN && b == -1) template_error("integer overflow");
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t floor_mod(int64_t a, int64_t b) {
  if (b == 0) template_error("integer modulo by zero");
  if (b == -1) return 0;
  int64_t m = a % b;
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m;
}

[[noreturn]] void unsupported(const std::string& op, const Value& a, const Value& b) {
  template_error("unsupported operand type(s) for " + op + ": '" + a.type_name() + "' and '" + b.type_name() + "'");
}

}  // namespace

Value binary_op(const std::string& op, const Value& a, const Value& b, const Interpreter& interp) {
  if (a.is_undefined()) template_error(undefined_message(a));
  if (b.is_undefined()) template_error(undefined_message(b));
  const bool nums = a.is_number() && b.is_number();
  const bool ints = nums && !a.is_float() && !b.is_float();
  if (op == "+") {
    if (ints) return Value::integer(add_checked(a.as_int(), b.as_int()));
    if (nums) return Value::floating(a.as_double() + b.as_double());
    if (a.is_string() && b.is_string()) {
      interp.check_size(a.str().size() + b.str().size());
      // markupsafe: Markup + str escapes the str (and the other way round).
      if (a.is_safe() || b.is_safe()) {
        return Value::string((a.is_safe() ? a.str() : detail::escape_html(a.str())) +
                                 (b.is_safe() ? b.str() : detail::escape_html(b.str())),
                             true);
      }
      return Value::string(a.str() + b.str());
    }
    if ((a.is_list() && b.is_list()) || (a.is_tuple() && b.is_tuple())) {
      std::vector<Value> items = a.items();
      items.insert(items.end(), b.items().begin(), b.items().end());
      return a.is_tuple() ? Value::tuple(std::move(items)) : Value::list(std::move(items));
    }
    if (a.is_string()) template_error("can only concatenate str (not \"" + b.type_name() + "\") to str");
    if (a.is_list()) template_error("can only concatenate list (not \"" + b.type_name() + "\") to list");
    unsupported("+", a, b);
  }
  if (op == "-") {
    if (ints) return Value::integer(sub_checked(a.as_int(), b.as_int()));
    if (nums) return Value::floating(a.as_double() - b.as_double());
    unsupported("-", a, b);
  }
  if (op == "*") {
    if (ints) return Value::integer(mul_checked(a.as_int(), b.as_int()));
    if (nums) return Value::floating(a.as_double() * b.as_double());
    const Value* seq = nullptr;
    const Value* count = nullptr;
    if ((a.is_string() || a.is_sequence_like()) && (b.is_int() || b.is_bool())) {
      seq = &a;
      count = &b;
    } else if ((b.is_string() || b.is_sequence_like()) && (a.is_int() || a.is_bool())) {
      seq = &b;
      count = &a;
    }
    if (!seq) unsupported("*", a, b);
    const int64_t n = std::max<int64_t>(0, count->as_int());
    if (seq->is_string()) {
      interp.check_size(static_cast<size_t>(n) * seq->str().size());
      std::string out;
      out.reserve(static_cast<size_t>(n) * seq->str().size());
      for (int64_t i = 0; i < n; ++i) out += seq->str();
      return Value::string(std::move(out), seq->is_safe());
    }
    interp.check_size(static_cast<size_t>(n) * seq->items().size() * sizeof(Value));
    std::vector<Value> items;
    for (int64_t i = 0; i < n; ++i) items.insert(items.end(), seq->items().begin(), seq->items().end());
    return seq->is_tuple() ? Value::tuple(std::move(items)) : Value::list(std::move(items));
  }
  if (op == "/") {
    if (!nums) unsupported("/", a, b);
    if (b.as_double() == 0) template_error("division by zero");
    return Value::floating(a.as_double() / b.as_double());
  }
  if (op == "//") {
    if (ints) return Value::integer(floor_div(a.as_int(), b.as_int()));
    if (!nums) unsupported("//", a, b);
    if (b.as_double() == 0) template_error("float floor division by zero");
    return Value::floating(std::floor(a.as_double() / b.as_double()));
  }
  if (op == "%") {
    if (a.is_string()) return Value::string(percent_format(a.str(), b));
    if (ints) return Value::integer(floor_mod(a.as_int(), b.as_int()));
    if (!nums) unsupported("%", a, b);
    if (b.as_double() == 0) template_error("float modulo");
    const double m = std::fmod(a.as_double(), b.as_double());
    return Value::floating((m != 0 && ((m < 0) != (b.as_double() < 0))) ? m + b.as_double() : m);
  }
  if (op == "**") {
    if (ints && b.as_int() >= 0) {
      int64_t r = 1, base = a.as_int();
      for (int64_t e = b.as_int(); e > 0; --e) {
        if (__builtin_mul_overflow(r, base, &r)) template_error("integer overflow");
        if (r == 0 || r == 1) break;
      }
      return Value::integer(r);
    }
    if (!nums) unsupported("** or pow()", a, b);
    if (a.as_double() == 0 && b.as_double() < 0) template_error("0.0 cannot be raised to a negative power");
    return Value::floating(std::pow(a.as_double(), b.as_double()));
  }
  template_error("unknown operator " + op);
}

}  // namespace specserve::chat::jinja
