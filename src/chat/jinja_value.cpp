#include "chat/jinja_value.h"

#include <nlohmann/json.hpp>

#include <algorithm>

#include "chat/jinja_interpreter.h"
#include "chat/py_text.h"
#include "core/error.h"

namespace specserve::chat::jinja {

const Value* Dict::find(std::string_view key) const {
  auto it = string_index.find(std::string(key));
  return it == string_index.end() ? nullptr : &items[it->second].second;
}

const Value* Dict::find(const Value& key) const {
  if (key.is_string()) return find(std::string_view(key.str()));
  for (const auto& [k, v] : items) {
    if (equals(k, key)) return &v;
  }
  return nullptr;
}

void Dict::set(Value key, Value value) {
  if (key.is_string()) {
    auto it = string_index.find(key.str());
    if (it != string_index.end()) {
      items[it->second].second = std::move(value);
      return;
    }
    string_index.emplace(key.str(), items.size());
  } else {
    for (auto& [k, v] : items) {
      if (equals(k, key)) {
        v = std::move(value);
        return;
      }
    }
  }
  items.emplace_back(std::move(key), std::move(value));
}

Value Value::undefined(std::string hint) {
  Value v;
  v.s_ = std::make_shared<const std::string>(std::move(hint));
  return v;
}
Value Value::none() {
  Value v;
  v.kind_ = Kind::None;
  return v;
}
Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::Bool;
  v.b_ = b;
  return v;
}
Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::Int;
  v.i_ = i;
  return v;
}
Value Value::floating(double d) {
  Value v;
  v.kind_ = Kind::Float;
  v.f_ = d;
  return v;
}
Value Value::string(std::string s, bool safe) {
  Value v;
  v.kind_ = Kind::String;
  v.s_ = std::make_shared<const std::string>(std::move(s));
  v.safe_ = safe;
  return v;
}
namespace {

uint32_t nested_depth(const std::vector<Value>& items) {
  uint32_t d = 0;
  for (const auto& x : items) d = std::max(d, x.depth());
  SS_CHECK(d < Value::kMaxDepth, "value nested deeper than {} levels", Value::kMaxDepth);
  return d + 1;
}

}  // namespace

Value Value::list(std::vector<Value> items) {
  Value v;
  v.kind_ = Kind::List;
  v.depth_ = nested_depth(items);
  v.list_ = std::make_shared<const std::vector<Value>>(std::move(items));
  return v;
}
Value Value::tuple(std::vector<Value> items) {
  Value v;
  v.kind_ = Kind::Tuple;
  v.depth_ = nested_depth(items);
  v.list_ = std::make_shared<const std::vector<Value>>(std::move(items));
  return v;
}
Value Value::dict(Dict d) {
  Value v;
  v.kind_ = Kind::Dict;
  uint32_t depth = 0;
  for (const auto& [k, x] : d.items) depth = std::max({depth, k.depth(), x.depth()});
  SS_CHECK(depth < kMaxDepth, "value nested deeper than {} levels", kMaxDepth);
  v.depth_ = depth + 1;
  v.dict_ = std::make_shared<const Dict>(std::move(d));
  return v;
}
Value Value::ns(std::shared_ptr<Namespace> n) {
  Value v;
  v.kind_ = Kind::Namespace;
  v.ns_ = std::move(n);
  return v;
}
Value Value::loop(std::shared_ptr<LoopState> l) {
  Value v;
  v.kind_ = Kind::Loop;
  v.loop_ = std::move(l);
  return v;
}
Value Value::callable(std::shared_ptr<Callable> c) {
  Value v;
  v.kind_ = Kind::Callable;
  v.fn_ = std::move(c);
  return v;
}

namespace {

template <typename Json>
Value value_from_json(const Json& j, int depth) {
  using V = Value;
  SS_CHECK(depth <= Value::kMaxJsonDepth, "template input is nested deeper than {} levels", Value::kMaxJsonDepth);
  switch (j.type()) {
    case Json::value_t::null: return V::none();
    case Json::value_t::boolean: return V::boolean(j.template get<bool>());
    case Json::value_t::number_integer: return V::integer(j.template get<int64_t>());
    case Json::value_t::number_unsigned: {
      const auto u = j.template get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return V::floating(static_cast<double>(u));
      return V::integer(static_cast<int64_t>(u));
    }
    case Json::value_t::number_float: return V::floating(j.template get<double>());
    case Json::value_t::string: return V::string(j.template get<std::string>());
    case Json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& x : j) items.push_back(value_from_json(x, depth + 1));
      return V::list(std::move(items));
    }
    case Json::value_t::object: {
      Dict d;
      d.items.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) d.set(V::string(it.key()), value_from_json(it.value(), depth + 1));
      return V::dict(std::move(d));
    }
    default: return V::none();
  }
}

}  // namespace

Value Value::from_json(const nlohmann::ordered_json& j, int depth) { return value_from_json(j, depth); }
Value Value::from_json(const nlohmann::json& j, int depth) { return value_from_json(j, depth); }

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return safe_ ? "Markup" : "str";
    case Kind::List: return "list";
    case Kind::Tuple: return "tuple";
    case Kind::Dict: return "dict";
    case Kind::Namespace: return "Namespace";
    case Kind::Loop: return "LoopContext";
    case Kind::Callable: return "function";
  }
  return "object";
}

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined:
    case Value::Kind::None: return false;
    case Value::Kind::Bool: return v.as_bool();
    case Value::Kind::Int: return v.as_int() != 0;
    case Value::Kind::Float: return v.as_double() != 0;
    case Value::Kind::String: return !v.str().empty();
    case Value::Kind::List:
    case Value::Kind::Tuple: return !v.items().empty();
    case Value::Kind::Dict: return !v.dict().items.empty();
    default: return true;
  }
}

namespace {
// Namespaces can contain themselves; recursion through them is cut off here.
constexpr int kMaxRecursion = 600;
void check_recursion(int depth) {
  SS_CHECK(depth <= kMaxRecursion, "maximum recursion depth exceeded (a value that contains itself?)");
}
bool equals_at(const Value& a, const Value& b, int depth);
}  // namespace

bool equals(const Value& a, const Value& b) { return equals_at(a, b, 0); }

namespace {
bool equals_at(const Value& a, const Value& b, int depth) {
  check_recursion(depth);
  using K = Value::Kind;
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case K::Undefined:
    case K::None: return true;
    case K::String: return a.str() == b.str();
    case K::List:
    case K::Tuple: {
      if (a.items().size() != b.items().size()) return false;
      for (size_t i = 0; i < a.items().size(); ++i) {
        if (!equals_at(a.items()[i], b.items()[i], depth + 1)) return false;
      }
      return true;
    }
    case K::Dict: {
      if (a.dict().items.size() != b.dict().items.size()) return false;
      for (const auto& [k, v] : a.dict().items) {
        const Value* other = b.dict().find(k);
        if (!other || !equals_at(v, *other, depth + 1)) return false;
      }
      return true;
    }
    case K::Namespace: return a.namespace_ptr() == b.namespace_ptr();
    case K::Loop: return a.loop_ptr() == b.loop_ptr();
    case K::Callable: return a.callable_ptr() == b.callable_ptr();
    default: return false;
  }
}
}  // namespace

bool less_than(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();  // UTF-8 byte order == code point order
  if ((a.is_list() && b.is_list()) || (a.is_tuple() && b.is_tuple())) {
    const auto& x = a.items();
    const auto& y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!equals(x[i], y[i])) return less_than(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  fail("'<' not supported between instances of '{}' and '{}'", a.type_name(), b.type_name());
}

namespace {

std::string repr_int(int64_t i) { return std::to_string(i); }

void repr_into(const Value& v, std::string& out, int depth = 0);

void str_into(const Value& v, std::string& out) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return;
    case Value::Kind::String: out += v.str(); return;
    default: repr_into(v, out);
  }
}

void repr_into(const Value& v, std::string& out, int depth) {
  check_recursion(depth);
  SS_CHECK(out.size() <= (size_t{256} << 20), "value too large to print");
  switch (v.kind()) {
    case Value::Kind::Undefined: out += "Undefined"; return;
    case Value::Kind::None: out += "None"; return;
    case Value::Kind::Bool: out += v.as_bool() ? "True" : "False"; return;
    case Value::Kind::Int: out += repr_int(v.as_int()); return;
    case Value::Kind::Float: out += py::repr_float(v.as_double()); return;
    case Value::Kind::String:
      if (v.is_safe()) out += "Markup(";
      out += py::repr_string(v.str());
      if (v.is_safe()) out += ")";
      return;
    case Value::Kind::List:
    case Value::Kind::Tuple: {
      const bool tuple = v.is_tuple();
      out += tuple ? "(" : "[";
      const auto& items = v.items();
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += ", ";
        repr_into(items[i], out, depth + 1);
      }
      if (tuple && items.size() == 1) out += ",";
      out += tuple ? ")" : "]";
      return;
    }
    case Value::Kind::Dict: {
      out += "{";
      bool first = true;
      for (const auto& [k, val] : v.dict().items) {
        if (!first) out += ", ";
        first = false;
        repr_into(k, out, depth + 1);
        out += ": ";
        repr_into(val, out, depth + 1);
      }
      out += "}";
      return;
    }
    case Value::Kind::Namespace: {
      out += "<Namespace ";
      out += "{";
      bool first = true;
      for (const auto& [k, val] : v.namespace_ptr()->attrs.items) {
        if (!first) out += ", ";
        first = false;
        repr_into(k, out, depth + 1);
        out += ": ";
        repr_into(val, out, depth + 1);
      }
      out += "}";
      out += ">";
      return;
    }
    case Value::Kind::Loop: out += "<LoopContext>"; return;
    case Value::Kind::Callable: out += "<function " + v.callable_ptr()->name() + ">"; return;
  }
}

std::string json_key(const Value& k) {
  switch (k.kind()) {
    case Value::Kind::String: return k.str();
    case Value::Kind::Bool: return k.as_bool() ? "true" : "false";
    case Value::Kind::None: return "null";
    case Value::Kind::Int: return std::to_string(k.as_int());
    case Value::Kind::Float: return py::json_float(k.as_double());
    default: fail("keys must be str, int, float, bool or None, not {}", k.type_name());
  }
}

void json_into(const Value& v, const JsonOptions& o, int level, std::string& out) {
  check_recursion(level);
  SS_CHECK(out.size() <= (size_t{256} << 20), "value too large for tojson");
  auto newline = [&](int lvl) {
    out += "\n";
    out.append(static_cast<size_t>(o.indent * lvl), ' ');
  };
  switch (v.kind()) {
    case Value::Kind::None: out += "null"; return;
    case Value::Kind::Bool: out += v.as_bool() ? "true" : "false"; return;
    case Value::Kind::Int: out += std::to_string(v.as_int()); return;
    case Value::Kind::Float: out += py::json_float(v.as_double()); return;
    case Value::Kind::String: out += py::json_string(v.str(), o.ensure_ascii); return;
    case Value::Kind::List:
    case Value::Kind::Tuple: {
      const auto& items = v.items();
      if (items.empty()) {
        out += "[]";
        return;
      }
      out += "[";
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += o.item_separator;
        if (o.indent >= 0) newline(level + 1);
        json_into(items[i], o, level + 1, out);
      }
      if (o.indent >= 0) newline(level);
      out += "]";
      return;
    }
    case Value::Kind::Dict: {
      const auto& items = v.dict().items;
      if (items.empty()) {
        out += "{}";
        return;
      }
      std::vector<std::pair<std::string, const Value*>> entries;
      entries.reserve(items.size());
      for (const auto& [k, val] : items) entries.emplace_back(json_key(k), &val);
      if (o.sort_keys) {
        std::stable_sort(entries.begin(), entries.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
      }
      out += "{";
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i) out += o.item_separator;
        if (o.indent >= 0) newline(level + 1);
        out += py::json_string(entries[i].first, o.ensure_ascii);
        out += o.key_separator;
        json_into(*entries[i].second, o, level + 1, out);
      }
      if (o.indent >= 0) newline(level);
      out += "}";
      return;
    }
    default: fail("Object of type {} is not JSON serializable", v.type_name());
  }
}

}  // namespace

std::string to_str(const Value& v) {
  std::string out;
  str_into(v, out);
  return out;
}

std::string to_repr(const Value& v) {
  std::string out;
  repr_into(v, out);
  return out;
}

std::string to_json(const Value& v, const JsonOptions& options) {
  std::string out;
  json_into(v, options, 0, out);
  return out;
}

}  // namespace specserve::chat::jinja
