#pragma once
// The values a chat template computes with, modelled on the Python objects Jinja2 sees when
// transformers renders a template: None, bool, int, float, str (with the `safe` mark of
// markupsafe.Markup), list, tuple, dict (insertion-ordered), Jinja's Undefined, namespace objects,
// loop objects and callables (macros, globals, bound methods).
//
// Lists, tuples and dicts are immutable once built (the template sandbox forbids mutating them),
// so values share them cheaply. Namespaces are the one mutable object (`{% set ns.x = ... %}`).
#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace specserve::chat::jinja {

class Value;
class Interpreter;

struct Dict {
  std::vector<std::pair<Value, Value>> items;
  std::unordered_map<std::string, size_t> string_index;  // for string keys
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  void set(Value key, Value value);  // insert or replace, keeping first-insertion order
};

struct Namespace {
  Dict attrs;
};

// Arguments of a call: positional and keyword, in order.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

class Callable {
 public:
  virtual ~Callable() = default;
  virtual Value call(Interpreter& interp, CallArgs args) = 0;
  virtual std::string name() const = 0;
};

struct LoopState;  // jinja_interpreter.h

class Value {
 public:
  enum class Kind : uint8_t { Undefined, None, Bool, Int, Float, String, List, Tuple, Dict, Namespace, Loop, Callable };

  Value() = default;  // Undefined
  static Value undefined(std::string hint = {});
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value floating(double d);
  static Value string(std::string s, bool safe = false);
  static Value list(std::vector<Value> items);
  static Value tuple(std::vector<Value> items);
  static Value dict(Dict d);
  static Value ns(std::shared_ptr<Namespace> n);
  static Value loop(std::shared_ptr<LoopState> l);
  static Value callable(std::shared_ptr<Callable> c);
  // JSON nested deeper than kMaxJsonDepth is an Error (no unbounded recursion on request data).
  // Object keys keep their order only with ordered_json (tojson output depends on it).
  static Value from_json(const nlohmann::ordered_json& j, int depth = 0);
  static Value from_json(const nlohmann::json& j, int depth = 0);
  static constexpr int kMaxJsonDepth = 256;

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_int() const { return kind_ == Kind::Int; }
  bool is_float() const { return kind_ == Kind::Float; }
  bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float || kind_ == Kind::Bool; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_list() const { return kind_ == Kind::List; }
  bool is_tuple() const { return kind_ == Kind::Tuple; }
  bool is_sequence_like() const { return kind_ == Kind::List || kind_ == Kind::Tuple; }
  bool is_dict() const { return kind_ == Kind::Dict; }
  bool is_namespace() const { return kind_ == Kind::Namespace; }
  bool is_loop() const { return kind_ == Kind::Loop; }
  bool is_callable() const { return kind_ == Kind::Callable; }
  bool is_safe() const { return safe_; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return kind_ == Kind::Bool ? (b_ ? 1 : 0) : i_; }
  double as_double() const { return kind_ == Kind::Float ? f_ : static_cast<double>(as_int()); }
  // String, or the Undefined hint ("" for an Undefined made without one, e.g. Value()).
  const std::string& str() const { return s_ ? *s_ : no_text(); }
  const std::vector<Value>& items() const { return *list_; }
  const Dict& dict() const { return *dict_; }
  const std::shared_ptr<Namespace>& namespace_ptr() const { return ns_; }
  const std::shared_ptr<LoopState>& loop_ptr() const { return loop_; }
  const std::shared_ptr<Callable>& callable_ptr() const { return fn_; }

  std::string type_name() const;  // Python's type name ('str', 'int', 'NoneType', 'Undefined', ...)
  // Nesting depth of lists / tuples / dicts (0 for scalars); building deeper than kMaxDepth is an
  // Error, so that printing, comparing or freeing a value never recurses without bound.
  uint32_t depth() const { return depth_; }
  static constexpr uint32_t kMaxDepth = 512;

 private:
  static const std::string& no_text() {
    static const std::string empty;
    return empty;
  }
  Kind kind_ = Kind::Undefined;
  bool safe_ = false;
  uint32_t depth_ = 0;
  bool b_ = false;
  int64_t i_ = 0;
  double f_ = 0;
  std::shared_ptr<const std::string> s_;
  std::shared_ptr<const std::vector<Value>> list_;
  std::shared_ptr<const Dict> dict_;
  std::shared_ptr<Namespace> ns_;
  std::shared_ptr<LoopState> loop_;
  std::shared_ptr<Callable> fn_;
};

// Python semantics.
bool truthy(const Value& v);
bool equals(const Value& a, const Value& b);
// a < b; throws a template Error for unorderable types.
bool less_than(const Value& a, const Value& b);
std::string to_str(const Value& v);   // str(v); Undefined prints as ''
std::string to_repr(const Value& v);  // repr(v)

struct JsonOptions {
  int indent = -1;  // -1: None
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;
};
// json.dumps(v, ...); throws for values JSON cannot hold (Undefined, namespaces, callables).
std::string to_json(const Value& v, const JsonOptions& options);

}  // namespace specserve::chat::jinja
