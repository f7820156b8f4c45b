// Argument helpers shared by the Jinja built-ins (declared in chat/jinja_builtin_util.h).
#include <cctype>
#include <cfenv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "chat/jinja_builtin_util.h"
#include "chat/jinja_interpreter.h"
#include "chat/py_text.h"
#include "core/error.h"

namespace specserve::chat::jinja::detail {

Bound bind(const std::string& fn, CallArgs& args, std::initializer_list<const char*> names,
           std::initializer_list<Value> defaults) {
  const std::vector<const char*> params(names);
  const std::vector<Value> dflt(defaults);
  Bound b;
  b.values.resize(params.size());
  b.given.assign(params.size(), false);
  if (args.positional.size() > params.size())
    template_error(fn + "() takes at most " + std::to_string(params.size()) + " arguments");
  for (size_t i = 0; i < args.positional.size(); ++i) {
    b.values[i] = args.positional[i];
    b.given[i] = true;
  }
  for (auto& [k, v] : args.keyword) {
    size_t i = 0;
    while (i < params.size() && k != params[i]) ++i;
    if (i == params.size()) template_error(fn + "() got an unexpected keyword argument '" + k + "'");
    if (b.given[i]) template_error(fn + "() got multiple values for argument '" + k + "'");
    b.values[i] = v;
    b.given[i] = true;
  }
  // Defaults apply to the trailing parameters.
  const size_t first_default = params.size() - dflt.size();
  for (size_t i = 0; i < params.size(); ++i) {
    if (b.given[i]) continue;
    if (i >= first_default) {
      b.values[i] = dflt[i - first_default];
    } else {
      template_error(fn + "() missing required argument '" + std::string(params[i]) + "'");
    }
  }
  return b;
}

const std::string& need_str(const Value& v, const std::string& what) {
  if (!v.is_string()) template_error(what + " must be str, not " + v.type_name());
  return v.str();
}

int64_t need_int(const Value& v, const std::string& what) {
  if (!v.is_int() && !v.is_bool()) template_error(what + " must be an integer, not " + v.type_name());
  return v.as_int();
}

std::string soft_str(const Value& v) { return to_str(v); }

Value str_value(std::string s, const Value& like) { return Value::string(std::move(s), like.is_safe()); }

std::string escape_html(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

size_t py_len(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return 0;
    case Value::Kind::String: return py::length(v.str());
    case Value::Kind::List:
    case Value::Kind::Tuple: return v.items().size();
    case Value::Kind::Dict: return v.dict().items.size();
    case Value::Kind::Namespace: template_error("object of type 'Namespace' has no len()");
    default: template_error("object of type '" + v.type_name() + "' has no len()");
  }
}

// ---- Python number helpers ---------------------------------------------------------------------

std::optional<int64_t> parse_py_int(std::string s, int base) {
  s = py::strip(s, nullptr, true, true);
  std::string t;
  bool neg = false;
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
  if (base == 0 || base == 16 || base == 8 || base == 2) {
    if (i + 1 < s.size() && s[i] == '0') {
      const char p = static_cast<char>(std::tolower(s[i + 1]));
      const int pb = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
      if (pb && (base == 0 || base == pb)) {
        base = pb;
        i += 2;
      }
    }
    if (base == 0) base = 10;
  }
  for (; i < s.size(); ++i) {
    if (s[i] == '_') continue;
    t.push_back(s[i]);
  }
  if (t.empty()) return std::nullopt;
  int64_t v = 0;
  for (char c : t) {
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (std::isalpha(static_cast<unsigned char>(c))) {
      d = std::tolower(c) - 'a' + 10;
    } else {
      return std::nullopt;
    }
    if (d >= base) return std::nullopt;
    if (__builtin_mul_overflow(v, base, &v) || __builtin_add_overflow(v, d, &v)) return std::nullopt;
  }
  return neg ? -v : v;
}

std::optional<double> parse_py_float(const std::string& s) {
  const std::string t = py::strip(s, nullptr, true, true);
  if (t.empty()) return std::nullopt;
  char* end = nullptr;
  const double d = std::strtod(t.c_str(), &end);
  if (end != t.c_str() + t.size()) return std::nullopt;
  return d;
}

double py_round(double x, int64_t ndigits) {
  const double scale = std::pow(10.0, static_cast<double>(ndigits));
  const int saved = std::fegetround();
  std::fesetround(FE_TONEAREST);
  const double r = std::nearbyint(x * scale) / scale;
  std::fesetround(saved);
  return r;
}

}  // namespace specserve::chat::jinja::detail
