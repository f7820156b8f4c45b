// Jinja2's built-in tests (`x is defined`, `x is divisibleby(3)` ...), with the semantics of
// Jinja2 3.1 in transformers' sandboxed chat-template environment.
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "chat/jinja_builtins.h"
#include "chat/jinja_builtin_util.h"
#include "chat/jinja_interpreter.h"
#include "chat/py_text.h"
#include "core/error.h"

namespace specserve::chat::jinja {

using namespace detail;

namespace {

// ---- tests -----------------------------------------------------------------------------------

using TestFn = std::function<bool(Interpreter&, const Value&, CallArgs&)>;

const std::map<std::string, TestFn>& tests() {
  static const std::map<std::string, TestFn> t = [] {
    std::map<std::string, TestFn> m;
    auto unary = [](std::function<bool(const Value&)> f) {
      return [f](Interpreter&, const Value& v, CallArgs& a) {
        if (!a.positional.empty() || !a.keyword.empty()) template_error("test takes no arguments");
        return f(v);
      };
    };
    auto arg1 = [](std::function<bool(const Value&, const Value&)> f) {
      return [f](Interpreter&, const Value& v, CallArgs& a) {
        Bound b = bind("test", a, {"other"});
        return f(v, b[0]);
      };
    };
    m["defined"] = unary([](const Value& v) { return !v.is_undefined(); });
    m["undefined"] = unary([](const Value& v) { return v.is_undefined(); });
    m["none"] = unary([](const Value& v) { return v.is_none(); });
    m["string"] = unary([](const Value& v) { return v.is_string(); });
    m["mapping"] = unary([](const Value& v) { return v.is_dict(); });
    m["iterable"] =
        unary([](const Value& v) { return v.is_undefined() || v.is_string() || v.is_sequence_like() || v.is_dict(); });
    m["sequence"] =
        unary([](const Value& v) { return v.is_undefined() || v.is_string() || v.is_sequence_like() || v.is_dict(); });
    m["number"] = unary([](const Value& v) { return v.is_number(); });
    m["integer"] = unary([](const Value& v) { return v.is_int(); });
    m["float"] = unary([](const Value& v) { return v.is_float(); });
    m["boolean"] = unary([](const Value& v) { return v.is_bool(); });
    m["true"] = unary([](const Value& v) { return v.is_bool() && v.as_bool(); });
    m["false"] = unary([](const Value& v) { return v.is_bool() && !v.as_bool(); });
    // Jinja's Undefined defines __call__ (to raise), so callable(Undefined) is true.
    m["callable"] = unary([](const Value& v) { return v.is_callable() || v.is_undefined(); });
    m["escaped"] = unary([](const Value& v) { return v.is_string() && v.is_safe(); });
    m["lower"] = unary([](const Value& v) {
      if (!v.is_string()) return false;
      return py::lower(v.str()) == v.str();
    });
    m["upper"] = unary([](const Value& v) {
      if (!v.is_string()) return false;
      return py::upper(v.str()) == v.str();
    });
    m["odd"] = unary([](const Value& v) {
      if (!v.is_int() && !v.is_bool()) template_error("odd test needs an integer");
      return (v.as_int() % 2) != 0;
    });
    m["even"] = unary([](const Value& v) {
      if (!v.is_int() && !v.is_bool()) template_error("even test needs an integer");
      return (v.as_int() % 2) == 0;
    });
    m["divisibleby"] = arg1([](const Value& v, const Value& n) {
      if (!v.is_number() || !n.is_number()) template_error("divisibleby needs numbers");
      if (n.as_double() == 0) template_error("integer modulo by zero");
      if (v.is_float() || n.is_float()) return std::fmod(v.as_double(), n.as_double()) == 0;
      return v.as_int() % n.as_int() == 0;
    });
    m["eq"] = arg1([](const Value& a, const Value& b) { return equals(a, b); });
    m["equalto"] = m["eq"];
    m["=="] = m["eq"];
    m["ne"] = arg1([](const Value& a, const Value& b) { return !equals(a, b); });
    m["!="] = m["ne"];
    m["lt"] = arg1([](const Value& a, const Value& b) { return less_than(a, b); });
    m["lessthan"] = m["lt"];
    m["<"] = m["lt"];
    m["le"] = arg1([](const Value& a, const Value& b) { return !less_than(b, a); });
    m["<="] = m["le"];
    m["gt"] = arg1([](const Value& a, const Value& b) { return less_than(b, a); });
    m["greaterthan"] = m["gt"];
    m[">"] = m["gt"];
    m["ge"] = arg1([](const Value& a, const Value& b) { return !less_than(a, b); });
    m[">="] = m["ge"];
    m["in"] = arg1([](const Value& a, const Value& b) { return contains(b, a); });
    m["sameas"] = arg1([](const Value& a, const Value& b) {
      if (a.kind() != b.kind()) return false;
      switch (a.kind()) {
        case Value::Kind::None:
        case Value::Kind::Undefined: return true;
        case Value::Kind::Bool: return a.as_bool() == b.as_bool();
        case Value::Kind::Int: return a.as_int() == b.as_int() && a.as_int() >= -5 && a.as_int() <= 256;
        case Value::Kind::Namespace: return a.namespace_ptr() == b.namespace_ptr();
        case Value::Kind::Callable: return a.callable_ptr() == b.callable_ptr();
        case Value::Kind::List:
        case Value::Kind::Tuple: return &a.items() == &b.items();
        case Value::Kind::Dict: return &a.dict() == &b.dict();
        default: return false;
      }
    });
    m["filter"] = unary([](const Value& v) { return v.is_string() && is_known_filter(v.str()); });
    m["test"] = unary([](const Value& v) { return v.is_string() && is_known_test(v.str()); });
    return m;
  }();
  return t;
}

}  // namespace

bool is_known_test(const std::string& name) { return tests().count(name) > 0; }

bool apply_test(Interpreter& interp, const std::string& name, const Value& value, CallArgs args) {
  const auto& t = tests();
  auto it = t.find(name);
  if (it == t.end()) template_error("No test named '" + name + "'.");
  return it->second(interp, value, args);
}

}  // namespace specserve::chat::jinja
