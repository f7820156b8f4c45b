// Jinja2 built-in filters and tests, Python str / dict / list methods, and the template globals,
// with the semantics of Jinja2 3.1 in transformers' sandboxed chat-template environment.
#include "chat/jinja_builtins.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <cfenv>
#include <cmath>
#include <ctime>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "chat/jinja_interpreter.h"
#include "chat/py_text.h"
#include "core/error.h"

namespace specserve::chat::jinja {

namespace {

// ---- argument helpers -------------------------------------------------------------------------

// Binds positional and keyword arguments to named parameters (Python call semantics, no *args).
struct Bound {
  std::vector<Value> values;
  std::vector<bool> given;
  const Value& operator[](size_t i) const { return values[i]; }
  bool has(size_t i) const { return given[i]; }
};

Bound bind(const std::string& fn, CallArgs& args, std::initializer_list<const char*> names,
           std::initializer_list<Value> defaults = {}) {
  const std::vector<const char*> params(names);
  const std::vector<Value> dflt(defaults);
  Bound b;
  b.values.resize(params.size());
  b.given.assign(params.size(), false);
  if (args.positional.size() > params.size()) template_error(fn + "() takes at most " + std::to_string(params.size()) + " arguments");
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

// ---- Python str methods ------------------------------------------------------------------------

std::vector<Value> split_whitespace(const std::string& s, int64_t maxsplit, bool from_right) {
  const auto cps = py::code_points(s);
  std::vector<std::pair<size_t, size_t>> parts;
  size_t i = 0;
  const size_t n = cps.size();
  if (!from_right) {
    while (i < n) {
      while (i < n && py::isspace(cps[i])) ++i;
      if (i >= n) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        size_t e = n;
        while (e > i && py::isspace(cps[e - 1])) --e;
        parts.emplace_back(i, e);
        break;
      }
      size_t j = i;
      while (j < n && !py::isspace(cps[j])) ++j;
      parts.emplace_back(i, j);
      i = j;
    }
  } else {
    size_t e = n;
    while (e > 0) {
      while (e > 0 && py::isspace(cps[e - 1])) --e;
      if (e == 0) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        size_t b = 0;
        while (b < e && py::isspace(cps[b])) ++b;
        parts.emplace_back(b, e);
        break;
      }
      size_t b = e;
      while (b > 0 && !py::isspace(cps[b - 1])) --b;
      parts.emplace_back(b, e);
      e = b;
    }
    std::reverse(parts.begin(), parts.end());
  }
  std::vector<Value> out;
  for (auto [b, e] : parts) out.push_back(Value::string(py::from_code_points(cps, b, e)));
  return out;
}

std::vector<Value> split_sep(const std::string& s, const std::string& sep, int64_t maxsplit, bool from_right) {
  if (sep.empty()) template_error("empty separator");
  std::vector<std::string> parts;
  if (!from_right) {
    size_t start = 0;
    while (true) {
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) break;
      const size_t at = s.find(sep, start);
      if (at == std::string::npos) break;
      parts.push_back(s.substr(start, at - start));
      start = at + sep.size();
    }
    parts.push_back(s.substr(start));
  } else {
    size_t end = s.size();
    std::vector<std::string> rev;
    while (true) {
      if (maxsplit >= 0 && static_cast<int64_t>(rev.size()) == maxsplit) break;
      if (end < sep.size()) break;
      const size_t at = s.rfind(sep, end - sep.size());
      if (at == std::string::npos) break;
      rev.push_back(s.substr(at + sep.size(), end - at - sep.size()));
      end = at;
    }
    rev.push_back(s.substr(0, end));
    parts.assign(rev.rbegin(), rev.rend());
  }
  std::vector<Value> out;
  for (auto& p : parts) out.push_back(Value::string(std::move(p)));
  return out;
}

std::string replace_all(const std::string& s, const std::string& old, const std::string& repl, int64_t count) {
  std::string out;
  if (old.empty()) {
    // Python inserts `repl` between every character (and at both ends).
    const auto cps = py::code_points(s);
    int64_t done = 0;
    for (size_t i = 0; i <= cps.size(); ++i) {
      if (count < 0 || done < count) {
        out += repl;
        ++done;
      }
      if (i < cps.size()) py::append_utf8(out, cps[i]);
    }
    return out;
  }
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t at = s.find(old, start);
    if (at == std::string::npos) break;
    out.append(s, start, at - start);
    out += repl;
    start = at + old.size();
    ++done;
  }
  out.append(s, start, std::string::npos);
  return out;
}

// Code-point index of a byte offset.
int64_t cp_index(const std::string& s, size_t byte_offset) { return static_cast<int64_t>(py::length(std::string_view(s).substr(0, byte_offset))); }

std::string py_title(const std::string& s) {
  std::string out;
  bool prev_cased = false;
  for (uint32_t cp : py::code_points(s)) {
    const bool cased = py::islower_cased(cp) || py::isupper_cased(cp) || py::isalpha(cp);
    if (cased) {
      py::append_utf8(out, prev_cased ? py::to_lower(cp) : py::to_upper(cp));
    } else {
      py::append_utf8(out, cp);
    }
    prev_cased = cased;
  }
  return out;
}

std::string py_capitalize(const std::string& s) {
  std::string out;
  bool first = true;
  for (uint32_t cp : py::code_points(s)) {
    py::append_utf8(out, first ? py::to_upper(cp) : py::to_lower(cp));
    first = false;
  }
  return out;
}

// str.format with {} / {0} / {name} fields (no format specs or conversions).
std::string py_str_format(const std::string& fmt, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '{') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
        out.push_back('{');
        ++i;
        continue;
      }
      const size_t close = fmt.find('}', i);
      if (close == std::string::npos) template_error("Single '{' encountered in format string");
      const std::string field = fmt.substr(i + 1, close - i - 1);
      if (field.find_first_of(":!") != std::string::npos) template_error("format specs are not supported in str.format");
      Value v;
      if (field.empty()) {
        if (auto_index >= args.positional.size()) template_error("Replacement index out of range for positional args tuple");
        v = args.positional[auto_index++];
      } else if (std::all_of(field.begin(), field.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
        const size_t k = std::stoul(field);
        if (k >= args.positional.size()) template_error("Replacement index out of range for positional args tuple");
        v = args.positional[k];
      } else {
        bool found = false;
        for (const auto& [key, val] : args.keyword) {
          if (key == field) {
            v = val;
            found = true;
          }
        }
        if (!found) template_error("KeyError: '" + field + "'");
      }
      out += to_str(v);
      i = close;
    } else if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') ++i;
      out.push_back('}');
    } else {
      out.push_back(c);
    }
  }
  return out;
}

Value call_str_method(const Value& self, const std::string& m, CallArgs args) {
  const std::string& s = self.str();
  auto chars_arg = [&](const char* fn) -> std::optional<std::string> {
    Bound b = bind(fn, args, {"chars"}, {Value::none()});
    if (b[0].is_none()) return std::nullopt;
    return need_str(b[0], "strip arg");
  };
  if (m == "strip" || m == "lstrip" || m == "rstrip") {
    const auto chars = chars_arg(m.c_str());
    return str_value(py::strip(s, chars ? &*chars : nullptr, m != "rstrip", m != "lstrip"), self);
  }
  if (m == "startswith" || m == "endswith") {
    Bound b = bind(m, args, {"prefix", "start", "end"}, {Value::none(), Value::none()});
    std::vector<std::string> options;
    if (b[0].is_tuple()) {
      for (const auto& x : b[0].items()) options.push_back(need_str(x, m + " arg"));
    } else {
      options.push_back(need_str(b[0], m + " first arg"));
    }
    std::string sub = s;
    if (!b[1].is_none() || !b[2].is_none()) {
      const auto cps = py::code_points(s);
      const auto n = static_cast<int64_t>(cps.size());
      auto norm = [&](const Value& v, int64_t d) {
        if (v.is_none()) return d;
        int64_t x = need_int(v, "slice index");
        if (x < 0) x += n;
        return std::clamp<int64_t>(x, 0, n);
      };
      const int64_t b0 = norm(b[1], 0), e0 = norm(b[2], n);
      sub = b0 < e0 ? py::from_code_points(cps, static_cast<size_t>(b0), static_cast<size_t>(e0)) : std::string();
    }
    for (const auto& o : options) {
      if (m == "startswith" ? sub.compare(0, o.size(), o) == 0 && sub.size() >= o.size()
                            : sub.size() >= o.size() && sub.compare(sub.size() - o.size(), o.size(), o) == 0) {
        return Value::boolean(true);
      }
    }
    return Value::boolean(false);
  }
  if (m == "split" || m == "rsplit") {
    Bound b = bind(m, args, {"sep", "maxsplit"}, {Value::none(), Value::integer(-1)});
    const int64_t maxsplit = need_int(b[1], "maxsplit");
    if (b[0].is_none()) return Value::list(split_whitespace(s, maxsplit, m == "rsplit"));
    return Value::list(split_sep(s, need_str(b[0], "sep"), maxsplit, m == "rsplit"));
  }
  if (m == "splitlines") {
    Bound b = bind(m, args, {"keepends"}, {Value::boolean(false)});
    std::vector<Value> out;
    const auto cps = py::code_points(s);
    size_t start = 0;
    for (size_t i = 0; i < cps.size(); ++i) {
      const uint32_t c = cps[i];
      const bool brk = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E ||
                       c == 0x85 || c == 0x2028 || c == 0x2029;
      if (!brk) continue;
      size_t end = i + 1;
      if (c == '\r' && i + 1 < cps.size() && cps[i + 1] == '\n') end = i + 2;
      out.push_back(Value::string(py::from_code_points(cps, start, truthy(b[0]) ? end : i)));
      start = end;
      i = end - 1;
    }
    if (start < cps.size()) out.push_back(Value::string(py::from_code_points(cps, start, cps.size())));
    return Value::list(std::move(out));
  }
  if (m == "lower" || m == "upper" || m == "title" || m == "capitalize" || m == "swapcase" || m == "casefold") {
    bind(m, args, {});
    if (m == "lower" || m == "casefold") return str_value(py::lower(s), self);
    if (m == "upper") return str_value(py::upper(s), self);
    if (m == "title") return str_value(py_title(s), self);
    if (m == "capitalize") return str_value(py_capitalize(s), self);
    std::string out;
    for (uint32_t cp : py::code_points(s)) {
      py::append_utf8(out, py::isupper_cased(cp) ? py::to_lower(cp) : py::islower_cased(cp) ? py::to_upper(cp) : cp);
    }
    return str_value(out, self);
  }
  if (m == "replace") {
    Bound b = bind(m, args, {"old", "new", "count"}, {Value::integer(-1)});
    return str_value(replace_all(s, need_str(b[0], "replace arg 1"), need_str(b[1], "replace arg 2"), need_int(b[2], "count")), self);
  }
  if (m == "find" || m == "rfind" || m == "index" || m == "rindex" || m == "count") {
    Bound b = bind(m, args, {"sub"});
    const std::string& sub = need_str(b[0], m + " arg");
    if (m == "count") {
      if (sub.empty()) return Value::integer(static_cast<int64_t>(py::length(s)) + 1);
      int64_t n = 0;
      for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
      return Value::integer(n);
    }
    const size_t at = (m == "find" || m == "index") ? s.find(sub) : s.rfind(sub);
    if (at == std::string::npos) {
      if (m == "index" || m == "rindex") template_error("substring not found");
      return Value::integer(-1);
    }
    return Value::integer(cp_index(s, at));
  }
  if (m == "join") {
    Bound b = bind(m, args, {"iterable"});
    std::string out;
    bool first = true;
    for (const auto& x : iterate(b[0])) {
      if (!first) out += s;
      first = false;
      out += need_str(x, "sequence item");
    }
    return str_value(out, self);
  }
  if (m == "isdigit" || m == "isalpha" || m == "isalnum" || m == "isspace" || m == "isdecimal" || m == "isnumeric" ||
      m == "islower" || m == "isupper") {
    bind(m, args, {});
    const auto cps = py::code_points(s);
    if (m == "islower" || m == "isupper") {
      bool cased = false;
      for (uint32_t cp : cps) {
        if (m == "islower" ? py::isupper_cased(cp) : py::islower_cased(cp)) return Value::boolean(false);
        cased |= py::islower_cased(cp) || py::isupper_cased(cp);
      }
      return Value::boolean(cased);
    }
    if (cps.empty()) return Value::boolean(false);
    for (uint32_t cp : cps) {
      bool ok = false;
      if (m == "isdigit") ok = py::isdigit(cp);
      if (m == "isalpha") ok = py::isalpha(cp);
      if (m == "isalnum") ok = py::isalpha(cp) || py::isnumeric(cp);
      if (m == "isspace") ok = py::isspace(cp);
      if (m == "isdecimal") ok = py::isdecimal(cp);
      if (m == "isnumeric") ok = py::isnumeric(cp);
      if (!ok) return Value::boolean(false);
    }
    return Value::boolean(true);
  }
  if (m == "removeprefix" || m == "removesuffix") {
    Bound b = bind(m, args, {"affix"});
    const std::string& a = need_str(b[0], m + " arg");
    if (m == "removeprefix" && s.compare(0, a.size(), a) == 0 && s.size() >= a.size()) return str_value(s.substr(a.size()), self);
    if (m == "removesuffix" && s.size() >= a.size() && s.compare(s.size() - a.size(), a.size(), a) == 0) {
      return str_value(s.substr(0, s.size() - a.size()), self);
    }
    return self;
  }
  if (m == "zfill" || m == "center" || m == "ljust" || m == "rjust") {
    Bound b = m == "zfill" ? bind(m, args, {"width"}) : bind(m, args, {"width", "fillchar"}, {Value::string(" ")});
    const int64_t width = need_int(b[0], "width");
    const auto n = static_cast<int64_t>(py::length(s));
    if (width <= n) return self;
    if (width > (int64_t{1} << 24)) template_error("width too large");
    const size_t pad = static_cast<size_t>(width - n);
    if (m == "zfill") {
      const bool sign = !s.empty() && (s[0] == '-' || s[0] == '+');
      return str_value((sign ? s.substr(0, 1) : "") + std::string(pad, '0') + (sign ? s.substr(1) : s), self);
    }
    const std::string& fill = need_str(b[1], "fillchar");
    if (py::length(fill) != 1) template_error("The fill character must be exactly one character long");
    auto rep = [&](size_t k) {
      std::string r;
      for (size_t i = 0; i < k; ++i) r += fill;
      return r;
    };
    if (m == "ljust") return str_value(s + rep(pad), self);
    if (m == "rjust") return str_value(rep(pad) + s, self);
    const size_t left = pad / 2 + (pad & static_cast<size_t>(width) & 1);
    return str_value(rep(left) + s + rep(pad - left), self);
  }
  if (m == "format") return Value::string(py_str_format(s, args));
  if (m == "partition" || m == "rpartition") {
    Bound b = bind(m, args, {"sep"});
    const std::string& sep = need_str(b[0], "sep");
    if (sep.empty()) template_error("empty separator");
    const size_t at = m == "partition" ? s.find(sep) : s.rfind(sep);
    if (at == std::string::npos) {
      return m == "partition" ? Value::tuple({self, Value::string(""), Value::string("")})
                              : Value::tuple({Value::string(""), Value::string(""), self});
    }
    return Value::tuple({Value::string(s.substr(0, at)), Value::string(sep), Value::string(s.substr(at + sep.size()))});
  }
  template_error("'str' object has no attribute '" + m + "'");
}

const std::set<std::string>& str_methods() {
  static const std::set<std::string> m = {
      "strip", "lstrip", "rstrip", "startswith", "endswith", "split", "rsplit", "splitlines", "lower", "upper",
      "title", "capitalize", "swapcase", "casefold", "replace", "find", "rfind", "index", "rindex", "count", "join",
      "isdigit", "isalpha", "isalnum", "isspace", "isdecimal", "isnumeric", "islower", "isupper", "removeprefix",
      "removesuffix", "zfill", "center", "ljust", "rjust", "format", "partition", "rpartition"};
  return m;
}

class BoundMethod final : public Callable {
 public:
  BoundMethod(Value self, std::string name) : self_(std::move(self)), name_(std::move(name)) {}
  std::string name() const override { return name_; }
  Value call(Interpreter& interp, CallArgs args) override {
    if (self_.is_string()) return call_str_method(self_, name_, std::move(args));
    if (self_.is_dict()) {
      const Dict& d = self_.dict();
      if (name_ == "items" || name_ == "keys" || name_ == "values") {
        bind(name_, args, {});
        std::vector<Value> out;
        for (const auto& [k, v] : d.items) {
          out.push_back(name_ == "items" ? Value::tuple({k, v}) : name_ == "keys" ? k : v);
        }
        return Value::list(std::move(out));
      }
      if (name_ == "get") {
        Bound b = bind("get", args, {"key", "default"}, {Value::none()});
        const Value* v = d.find(b[0]);
        return v ? *v : b[1];
      }
      if (name_ == "copy") return self_;
    }
    if (self_.is_sequence_like()) {
      if (name_ == "count") {
        Bound b = bind("count", args, {"value"});
        int64_t n = 0;
        for (const auto& x : self_.items()) n += equals(x, b[0]);
        return Value::integer(n);
      }
      if (name_ == "index") {
        Bound b = bind("index", args, {"value"});
        for (size_t i = 0; i < self_.items().size(); ++i) {
          if (equals(self_.items()[i], b[0])) return Value::integer(static_cast<int64_t>(i));
        }
        template_error("value is not in list");
      }
    }
    template_error("access to attribute '" + name_ + "' of '" + self_.type_name() + "' object is unsafe.");
  }

 private:
  Value self_;
  std::string name_;
};

// ---- filters ---------------------------------------------------------------------------------

using FilterFn = std::function<Value(Interpreter&, const Value&, CallArgs&)>;

std::vector<Value> as_list(const Value& v) { return iterate(v); }

Value attribute_of(const Value& item, const std::string& attribute) {
  // "a.b" walks attributes; integer parts index sequences.
  Value cur = item;
  size_t start = 0;
  while (true) {
    const size_t dot = attribute.find('.', start);
    const std::string part = attribute.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    cur = numeric ? get_item(cur, Value::integer(std::stoll(part))) : get_item(cur, Value::string(part));
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value::string(py::lower(v.str()));
  return v;
}

bool json_bool_arg(const Value& v) { return truthy(v); }

Value filter_tojson(const Value& value, CallArgs& args) {
  Bound b = bind("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"},
                 {Value::boolean(false), Value::none(), Value::none(), Value::boolean(false)});
  JsonOptions o;
  o.ensure_ascii = json_bool_arg(b[0]);
  if (!b[1].is_none()) {
    if (b[1].is_string()) template_error("tojson: a string indent is not supported");
    o.indent = static_cast<int>(std::clamp<int64_t>(need_int(b[1], "indent"), 0, 64));
    o.item_separator = ",";
  }
  if (!b[2].is_none()) {
    if (!b[2].is_sequence_like() || b[2].items().size() != 2) template_error("tojson: separators must be a pair of strings");
    o.item_separator = need_str(b[2].items()[0], "separator");
    o.key_separator = need_str(b[2].items()[1], "separator");
  }
  o.sort_keys = json_bool_arg(b[3]);
  return Value::string(to_json(value, o));
}

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

std::string indent_text(const std::string& s, const std::string& ind, bool first, bool blank) {
  std::string text = s + "\n";
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\n') {
      lines.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  std::string rv;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) rv += (i ? "\n" + ind : "") + lines[i];
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) rv += "\n" + (lines[i].empty() ? "" : ind + lines[i]);
  }
  return first ? ind + rv : rv;
}

const std::map<std::string, FilterFn>& filters();

Value run_filter(Interpreter& interp, const std::string& name, const Value& v, CallArgs args) {
  const auto& f = filters();
  auto it = f.find(name);
  if (it == f.end()) template_error("No filter named '" + name + "'.");
  return it->second(interp, v, args);
}

std::vector<Value> select_items(Interpreter& interp, const Value& seq, CallArgs& args, bool keep_matching, bool by_attr) {
  std::vector<Value> out;
  std::string attr;
  size_t next = 0;
  if (by_attr) {
    if (args.positional.empty()) template_error("selectattr/rejectattr need an attribute name");
    attr = need_str(args.positional[0], "attribute");
    next = 1;
  }
  std::string test;
  CallArgs test_args;
  if (next < args.positional.size()) {
    test = need_str(args.positional[next], "test name");
    test_args.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(next) + 1, args.positional.end());
    test_args.keyword = args.keyword;
  }
  for (const auto& item : iterate(seq)) {
    const Value subject = by_attr ? attribute_of(item, attr) : item;
    const bool ok = test.empty() ? truthy(subject) : apply_test(interp, test, subject, test_args);
    if (ok == keep_matching) out.push_back(item);
  }
  return out;
}

const std::map<std::string, FilterFn>& filters() {
  static const std::map<std::string, FilterFn> f = [] {
    std::map<std::string, FilterFn> m;
    m["tojson"] = [](Interpreter&, const Value& v, CallArgs& a) { return filter_tojson(v, a); };
    m["trim"] = [](Interpreter&, const Value& v, CallArgs& a) {
      Bound b = bind("trim", a, {"chars"}, {Value::none()});
      const std::string s = soft_str(v);
      if (b[0].is_none()) return str_value(py::strip(s, nullptr, true, true), v);
      const std::string chars = need_str(b[0], "chars");
      return str_value(py::strip(s, &chars, true, true), v);
    };
    m["length"] = [](Interpreter&, const Value& v, CallArgs& a) {
      bind("length", a, {});
      return Value::integer(static_cast<int64_t>(py_len(v)));
    };
    m["count"] = m["length"];
    m["string"] = [](Interpreter&, const Value& v, CallArgs& a) {
      bind("string", a, {});
      return v.is_string() ? v : Value::string(soft_str(v));
    };
    m["safe"] = [](Interpreter&, const Value& v, CallArgs& a) {
      bind("safe", a, {});
      return Value::string(soft_str(v), true);
    };
    m["items"] = [](Interpreter&, const Value& v, CallArgs& a) {
      bind("items", a, {});
      if (v.is_undefined()) return Value::list({});
      if (!v.is_dict()) template_error("Can only get item pairs from a mapping.");
      std::vector<Value> out;
      for (const auto& [k, val] : v.dict().items) out.push_back(Value::tuple({k, val}));
      return Value::list(std::move(out));
    };
    m["default"] = [](Interpreter&, const Value& v, CallArgs& a) {
      Bound b = bind("default", a, {"default_value", "boolean"}, {Value::string(""), Value::boolean(false)});
      if (v.is_undefined() || (truthy(b[1]) && !truthy(v))) return b[0];
      return v;
    };
    m["d"] = m["default"];
    m["lower"] = [](Interpreter&, const Value& v, CallArgs& a) {
      bind("lower", a, {});
      return str_value(py::lower(soft_str(v)), v);
    };
    m["upper"] = [](Interpreter&, const Value& v, CallArgs& a) {
      bind("upper", a, {});
      return str_value(py::upper(soft_str(v)), v);
    };
    m["capitalize"] = [](Interpreter&, const Value& v, CallArgs& a) {
      bind("capitalize", a, {});
      return str_value(py_capitalize(soft_str(v)), v);
    };
    m["title"] = [](Interpreter&, const Value& v, CallArgs& a) {
      bind("title", a, {});
      // Words start after '-', whitespace or an opening bracket.
      std::string out;
      bool start = true;
      for (uint32_t cp : py::code_points(soft_str(v))) {
        const bool boundary = cp == '-' || py::isspace(cp) || cp == '(' || cp == '{' || cp == '[' || cp == '<';
        if (boundary) {
          py::append_utf8(out, cp);
          start = true;
        } else {
          py::append_utf8(out, start ? py::to_upper(cp) : py::to_lower(cp));
          start = false;
        }
      }
      return str_value(out, v);
    };
    m["replace"] = [](Interpreter&, const Value& v, CallArgs& a) {
      Bound b = bind("replace", a, {"old", "new", "count"}, {Value::none()});
      const int64_t count = b[2].is_none() ? -1 : need_int(b[2], "count");
      return str_value(replace_all(soft_str(v), soft_str(b[0]), soft_str(b[1]), count), v);
    };
    m["join"] = [](Interpreter& interp, const Value& v, CallArgs& a) {
      Bound b = bind("join", a, {"d", "attribute"}, {Value::string(""), Value::none()});
      const std::string sep = soft_str(b[0]);
      std::string out;
      bool first = true;
      for (const auto& item : iterate(v)) {
        if (!first) out += sep;
        first = false;
        out += to_str(b[1].is_none() ? item : attribute_of(item, soft_str(b[1])));
        interp.check_size(out.size());
      }
      return Value::string(std::move(out));
    };
    m["first"] = [](Interpreter&, const Value& v, CallArgs& a) {
      bind("first", a, {});
      const auto items = iterate(v);
      return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
    };
    m["last"] = [](Interpreter&, const Value& v, CallArgs& a) {
      bind("last", a, {});
      const auto items = iterate(v);
      return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
    };
    m["list"] = [](Interpreter&, const Value& v, CallArgs& a) {
      bind("list", a, {});
      return Value::list(as_list(v));
    };
    m["reverse"] = [](Interpreter&, const Value& v, CallArgs& a) {
      bind("reverse", a, {});
      if (v.is_string()) {
        auto cps = py::code_points(v.str());
        std::reverse(cps.begin(), cps.end());
        return str_value(py::from_code_points(cps, 0, cps.size()), v);
      }
      auto items = iterate(v);
      std::reverse(items.begin(), items.end());
      return Value::list(std::move(items));
    };
    m["int"] = [](Interpreter&, const Value& v, CallArgs& a) {
      Bound b = bind("int", a, {"default", "base"}, {Value::integer(0), Value::integer(10)});
      if (v.is_int()) return v;
      if (v.is_bool()) return Value::integer(v.as_int());
      if (v.is_float()) {
        if (!std::isfinite(v.as_double())) return b[0];
        return Value::integer(static_cast<int64_t>(v.as_double()));
      }
      if (v.is_string()) {
        if (auto i = parse_py_int(v.str(), static_cast<int>(need_int(b[1], "base")))) return Value::integer(*i);
        if (auto d = parse_py_float(v.str()); d && std::isfinite(*d)) return Value::integer(static_cast<int64_t>(*d));
      }
      return b[0];
    };
    m["float"] = [](Interpreter&, const Value& v, CallArgs& a) {
      Bound b = bind("float", a, {"default"}, {Value::floating(0.0)});
      if (v.is_number()) return Value::floating(v.as_double());
      if (v.is_string()) {
        if (auto d = parse_py_float(v.str())) return Value::floating(*d);
      }
      return b[0];
    };
    m["abs"] = [](Interpreter&, const Value& v, CallArgs& a) {
      bind("abs", a, {});
      if (v.is_float()) return Value::floating(std::fabs(v.as_double()));
      if (v.is_int() || v.is_bool()) {
        if (v.as_int() == INT64_MIN) template_error("integer overflow");
        return Value::integer(std::llabs(v.as_int()));
      }
      template_error("bad operand type for abs(): '" + v.type_name() + "'");
    };
    m["round"] = [](Interpreter&, const Value& v, CallArgs& a) {
      Bound b = bind("round", a, {"precision", "method"}, {Value::integer(0), Value::string("common")});
      const std::string method = need_str(b[1], "method");
      if (!v.is_number()) template_error("round() needs a number");
      const int64_t p = need_int(b[0], "precision");
      if (method == "common") {
        if (!v.is_float()) return v;
        return Value::floating(py_round(v.as_double(), p));
      }
      const double scale = std::pow(10.0, static_cast<double>(p));
      if (method == "ceil") return Value::floating(std::ceil(v.as_double() * scale) / scale);
      if (method == "floor") return Value::floating(std::floor(v.as_double() * scale) / scale);
      template_error("method must be common, ceil or floor");
    };
    m["map"] = [](Interpreter& interp, const Value& v, CallArgs& a) {
      std::vector<Value> out;
      std::string attribute;
      Value dflt;
      bool has_default = false;
      for (const auto& [k, val] : a.keyword) {
        if (k == "attribute") attribute = soft_str(val);
        if (k == "default") {
          dflt = val;
          has_default = true;
        }
      }
      if (!attribute.empty()) {
        for (const auto& item : iterate(v)) {
          Value x = attribute_of(item, attribute);
          out.push_back(x.is_undefined() && has_default ? dflt : x);
        }
        return Value::list(std::move(out));
      }
      if (a.positional.empty()) template_error("map requires a filter name or attribute=");
      const std::string name = need_str(a.positional[0], "filter name");
      CallArgs rest;
      rest.positional.assign(a.positional.begin() + 1, a.positional.end());
      rest.keyword = a.keyword;
      for (const auto& item : iterate(v)) out.push_back(run_filter(interp, name, item, rest));
      return Value::list(std::move(out));
    };
    m["select"] = [](Interpreter& interp, const Value& v, CallArgs& a) { return Value::list(select_items(interp, v, a, true, false)); };
    m["reject"] = [](Interpreter& interp, const Value& v, CallArgs& a) { return Value::list(select_items(interp, v, a, false, false)); };
    m["selectattr"] = [](Interpreter& interp, const Value& v, CallArgs& a) { return Value::list(select_items(interp, v, a, true, true)); };
    m["rejectattr"] = [](Interpreter& interp, const Value& v, CallArgs& a) { return Value::list(select_items(interp, v, a, false, true)); };
    m["sort"] = [](Interpreter&, const Value& v, CallArgs& a) {
      Bound b = bind("sort", a, {"reverse", "case_sensitive", "attribute"}, {Value::boolean(false), Value::boolean(false), Value::none()});
      auto items = iterate(v);
      const bool cs = truthy(b[1]);
      const std::string attr = b[2].is_none() ? "" : soft_str(b[2]);
      auto key = [&](const Value& x) { return sort_key(attr.empty() ? x : attribute_of(x, attr), cs); };
      std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) { return less_than(key(x), key(y)); });
      if (truthy(b[0])) std::reverse(items.begin(), items.end());
      return Value::list(std::move(items));
    };
    m["unique"] = [](Interpreter&, const Value& v, CallArgs& a) {
      Bound b = bind("unique", a, {"case_sensitive", "attribute"}, {Value::boolean(false), Value::none()});
      std::vector<Value> out, seen;
      for (const auto& item : iterate(v)) {
        const Value k = sort_key(b[1].is_none() ? item : attribute_of(item, soft_str(b[1])), truthy(b[0]));
        if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, k); })) {
          seen.push_back(k);
          out.push_back(item);
        }
      }
      return Value::list(std::move(out));
    };
    m["dictsort"] = [](Interpreter&, const Value& v, CallArgs& a) {
      Bound b = bind("dictsort", a, {"case_sensitive", "by", "reverse"}, {Value::boolean(false), Value::string("key"), Value::boolean(false)});
      if (!v.is_dict()) template_error("dictsort needs a mapping");
      std::vector<Value> items;
      for (const auto& [k, val] : v.dict().items) items.push_back(Value::tuple({k, val}));
      const size_t pos = need_str(b[1], "by") == "value" ? 1 : 0;
      std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
        return less_than(sort_key(x.items()[pos], truthy(b[0])), sort_key(y.items()[pos], truthy(b[0])));
      });
      if (truthy(b[2])) std::reverse(items.begin(), items.end());
      return Value::list(std::move(items));
    };
    m["sum"] = [](Interpreter& interp, const Value& v, CallArgs& a) {
      Bound b = bind("sum", a, {"attribute", "start"}, {Value::none(), Value::integer(0)});
      Value total = b[1];
      for (const auto& item : iterate(v)) total = binary_op("+", total, b[0].is_none() ? item : attribute_of(item, soft_str(b[0])), interp);
      return total;
    };
    auto minmax = [](bool want_max) {
      return [want_max](Interpreter&, const Value& v, CallArgs& a) {
        Bound b = bind(want_max ? "max" : "min", a, {"case_sensitive", "attribute"}, {Value::boolean(false), Value::none()});
        const auto items = iterate(v);
        if (items.empty()) return Value::undefined(std::string("No aggregated item, sequence was empty."));
        const Value* best = &items[0];
        auto key = [&](const Value& x) { return sort_key(b[1].is_none() ? x : attribute_of(x, soft_str(b[1])), truthy(b[0])); };
        for (const auto& x : items) {
          if (want_max ? less_than(key(*best), key(x)) : less_than(key(x), key(*best))) best = &x;
        }
        return *best;
      };
    };
    m["max"] = minmax(true);
    m["min"] = minmax(false);
    m["indent"] = [](Interpreter&, const Value& v, CallArgs& a) {
      Bound b = bind("indent", a, {"width", "first", "blank"}, {Value::integer(4), Value::boolean(false), Value::boolean(false)});
      const std::string ind = b[0].is_string() ? b[0].str() : std::string(static_cast<size_t>(std::clamp<int64_t>(need_int(b[0], "width"), 0, 1024)), ' ');
      return str_value(indent_text(soft_str(v), ind, truthy(b[1]), truthy(b[2])), v);
    };
    m["center"] = [](Interpreter&, const Value& v, CallArgs& a) {
      Bound b = bind("center", a, {"width"}, {Value::integer(80)});
      CallArgs ca;
      ca.positional.push_back(b[0]);
      return call_str_method(Value::string(soft_str(v)), "center", ca);
    };
    m["wordcount"] = [](Interpreter&, const Value& v, CallArgs& a) {
      bind("wordcount", a, {});
      int64_t n = 0;
      bool in_word = false;
      for (uint32_t cp : py::code_points(soft_str(v))) {
        const bool w = py::isalpha(cp) || py::isnumeric(cp) || cp == '_';
        if (w && !in_word) ++n;
        in_word = w;
      }
      return Value::integer(n);
    };
    m["format"] = [](Interpreter&, const Value& v, CallArgs& a) {
      if (!a.keyword.empty() && !a.positional.empty()) template_error("can't handle positional and keyword arguments at the same time");
      if (!a.keyword.empty()) {
        Dict d;
        for (const auto& [k, val] : a.keyword) d.set(Value::string(k), val);
        return Value::string(percent_format(soft_str(v), Value::dict(std::move(d))));
      }
      return Value::string(percent_format(soft_str(v), Value::tuple(a.positional)));
    };
    m["escape"] = [](Interpreter&, const Value& v, CallArgs& a) {
      bind("escape", a, {});
      if (v.is_string() && v.is_safe()) return v;
      return Value::string(escape_html(soft_str(v)), true);
    };
    m["e"] = m["escape"];
    m["forceescape"] = [](Interpreter&, const Value& v, CallArgs& a) {
      bind("forceescape", a, {});
      return Value::string(escape_html(soft_str(v)), true);
    };
    m["attr"] = [](Interpreter&, const Value& v, CallArgs& a) {
      Bound b = bind("attr", a, {"name"});
      return get_attr(v, need_str(b[0], "attribute name"));
    };
    m["batch"] = [](Interpreter&, const Value& v, CallArgs& a) {
      Bound b = bind("batch", a, {"linecount", "fill_with"}, {Value::none()});
      const int64_t n = need_int(b[0], "linecount");
      if (n <= 0) template_error("batch size must be positive");
      std::vector<Value> out, cur;
      for (const auto& item : iterate(v)) {
        cur.push_back(item);
        if (static_cast<int64_t>(cur.size()) == n) {
          out.push_back(Value::list(std::move(cur)));
          cur.clear();
        }
      }
      if (!cur.empty()) {
        if (!b[1].is_none()) {
          while (static_cast<int64_t>(cur.size()) < n) cur.push_back(b[1]);
        }
        out.push_back(Value::list(std::move(cur)));
      }
      return Value::list(std::move(out));
    };
    return m;
  }();
  return f;
}

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
    m["iterable"] = unary([](const Value& v) {
      return v.is_undefined() || v.is_string() || v.is_sequence_like() || v.is_dict();
    });
    m["sequence"] = unary([](const Value& v) {
      return v.is_undefined() || v.is_string() || v.is_sequence_like() || v.is_dict();
    });
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

// ---- globals ---------------------------------------------------------------------------------

class NativeFunction final : public Callable {
 public:
  using Fn = std::function<Value(Interpreter&, CallArgs&)>;
  NativeFunction(std::string name, Fn fn) : name_(std::move(name)), fn_(std::move(fn)) {}
  std::string name() const override { return name_; }
  Value call(Interpreter& interp, CallArgs args) override { return fn_(interp, args); }

 private:
  std::string name_;
  Fn fn_;
};

Value make_native(std::string name, NativeFunction::Fn fn) {
  return Value::callable(std::make_shared<NativeFunction>(std::move(name), std::move(fn)));
}

// A cycler / joiner keep state across calls.
struct CyclerState {
  std::vector<Value> items;
  size_t pos = 0;
};

}  // namespace

bool is_known_filter(const std::string& name) { return filters().count(name) > 0; }
bool is_known_test(const std::string& name) { return tests().count(name) > 0; }

Value apply_filter(Interpreter& interp, const std::string& name, const Value& value, CallArgs args) {
  return run_filter(interp, name, value, std::move(args));
}

bool apply_test(Interpreter& interp, const std::string& name, const Value& value, CallArgs args) {
  const auto& t = tests();
  auto it = t.find(name);
  if (it == t.end()) template_error("No test named '" + name + "'.");
  return it->second(interp, value, args);
}

Value get_method(const Value& self, const std::string& name) {
  if (self.is_string()) {
    if (str_methods().count(name)) return Value::callable(std::make_shared<BoundMethod>(self, name));
    return Value::undefined();
  }
  if (self.is_dict()) {
    static const std::set<std::string> dict_methods = {"items", "keys", "values", "get", "copy", "pop", "popitem",
                                                       "update", "setdefault", "clear", "fromkeys"};
    if (dict_methods.count(name)) return Value::callable(std::make_shared<BoundMethod>(self, name));
    return Value::undefined();
  }
  if (self.is_sequence_like()) {
    static const std::set<std::string> list_methods = {"count", "index", "append", "extend", "insert", "pop",
                                                       "remove", "reverse", "sort", "clear", "copy"};
    if (list_methods.count(name) && !(self.is_tuple() && name != "count" && name != "index")) {
      return Value::callable(std::make_shared<BoundMethod>(self, name));
    }
  }
  return Value::undefined();
}

std::string percent_format(const std::string& fmt, const Value& args) {
  std::vector<Value> positional;
  const Value* mapping = nullptr;
  if (args.is_tuple()) {
    positional = args.items();
  } else if (args.is_dict()) {
    mapping = &args;
  } else {
    positional.push_back(args);
  }
  size_t next = 0;
  std::string out;
  char buf[512];
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out.push_back(fmt[i]);
      continue;
    }
    if (++i >= fmt.size()) template_error("incomplete format");
    if (fmt[i] == '%') {
      out.push_back('%');
      continue;
    }
    Value v;
    if (fmt[i] == '(') {
      const size_t close = fmt.find(')', i);
      if (close == std::string::npos || !mapping) template_error("format requires a mapping");
      const Value* found = mapping->dict().find(std::string_view(fmt).substr(i + 1, close - i - 1));
      if (!found) template_error("KeyError in format");
      v = *found;
      i = close + 1;
    } else {
      if (next >= positional.size()) template_error("not enough arguments for format string");
      v = positional[next++];
    }
    std::string spec = "%";
    while (i < fmt.size() && std::strchr("-+ #0123456789.", fmt[i])) spec.push_back(fmt[i++]);
    if (i >= fmt.size()) template_error("incomplete format");
    const char conv = fmt[i];
    if (spec.size() > 12) template_error("format spec too long");
    switch (conv) {
      case 's':
      case 'r': {
        // Width / precision counted in code points, as Python does.
        const std::string text = conv == 's' ? to_str(v) : to_repr(v);
        bool left = false;
        size_t k = 1;
        while (k < spec.size() && std::strchr("-+ #0", spec[k])) left |= spec[k++] == '-';
        size_t width = 0, precision = std::string::npos;
        while (k < spec.size() && std::isdigit(static_cast<unsigned char>(spec[k]))) width = width * 10 + static_cast<size_t>(spec[k++] - '0');
        if (k < spec.size() && spec[k] == '.') {
          precision = 0;
          ++k;
          while (k < spec.size() && std::isdigit(static_cast<unsigned char>(spec[k]))) precision = precision * 10 + static_cast<size_t>(spec[k++] - '0');
        }
        auto cps = py::code_points(text);
        if (precision < cps.size()) cps.resize(precision);
        std::string body = py::from_code_points(cps, 0, cps.size());
        const std::string pad(width > cps.size() ? width - cps.size() : 0, ' ');
        out += left ? body + pad : pad + body;
        break;
      }
      case 'd':
      case 'i':
      case 'u': {
        if (!v.is_number()) template_error("%d format: a real number is required, not " + v.type_name());
        std::snprintf(buf, sizeof buf, (spec + "lld").c_str(), static_cast<long long>(v.is_float() ? static_cast<int64_t>(v.as_double()) : v.as_int()));
        out += buf;
        break;
      }
      case 'f':
      case 'F':
      case 'e':
      case 'E':
      case 'g':
      case 'G': {
        if (!v.is_number()) template_error("must be real number, not " + v.type_name());
        std::snprintf(buf, sizeof buf, (spec + conv).c_str(), v.as_double());
        out += buf;
        break;
      }
      case 'x':
      case 'X':
      case 'o': {
        if (!v.is_int() && !v.is_bool()) template_error("%x format: an integer is required");
        std::snprintf(buf, sizeof buf, (spec + "ll" + conv).c_str(), static_cast<long long>(v.as_int()));
        out += buf;
        break;
      }
      default: template_error(std::string("unsupported format character '") + conv + "'");
    }
  }
  if (next < positional.size() && !mapping && args.is_tuple()) template_error("not all arguments converted during string formatting");
  return out;
}

void add_globals(Dict& g) {
  g.set(Value::string("range"), make_native("range", [](Interpreter& interp, CallArgs& a) {
          if (!a.keyword.empty() || a.positional.empty() || a.positional.size() > 3) template_error("range expected 1 to 3 integer arguments");
          int64_t start = 0, stop, step = 1;
          if (a.positional.size() == 1) {
            stop = need_int(a.positional[0], "range argument");
          } else {
            start = need_int(a.positional[0], "range argument");
            stop = need_int(a.positional[1], "range argument");
            if (a.positional.size() == 3) step = need_int(a.positional[2], "range argument");
          }
          if (step == 0) template_error("range() arg 3 must not be zero");
          // The sandbox caps ranges at 100000 items (jinja2.sandbox.MAX_RANGE).
          const double count = std::max(0.0, std::ceil((static_cast<double>(stop) - static_cast<double>(start)) / static_cast<double>(step)));
          if (count > 100000 || count > static_cast<double>(interp.limits().max_range)) {
            template_error("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
          }
          std::vector<Value> out;
          for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out.push_back(Value::integer(i));
          return Value::list(std::move(out));
        }));
  g.set(Value::string("dict"), make_native("dict", [](Interpreter&, CallArgs& a) {
          Dict d;
          if (a.positional.size() > 1) template_error("dict expected at most 1 argument");
          if (!a.positional.empty()) {
            const Value& src = a.positional[0];
            if (src.is_dict()) {
              d = src.dict();
            } else {
              for (const auto& pair : iterate(src)) {
                const auto kv = iterate(pair);
                if (kv.size() != 2) template_error("dictionary update sequence element has the wrong length");
                d.set(kv[0], kv[1]);
              }
            }
          }
          for (const auto& [k, v] : a.keyword) d.set(Value::string(k), v);
          return Value::dict(std::move(d));
        }));
  g.set(Value::string("namespace"), make_native("namespace", [](Interpreter& interp, CallArgs& a) {
          auto ns = std::make_shared<Namespace>();
          interp.track(ns);
          if (a.positional.size() > 1) template_error("namespace expected at most 1 positional argument");
          if (!a.positional.empty()) {
            if (!a.positional[0].is_dict()) template_error("namespace argument must be a mapping");
            ns->attrs = a.positional[0].dict();
          }
          for (const auto& [k, v] : a.keyword) ns->attrs.set(Value::string(k), v);
          return Value::ns(std::move(ns));
        }));
  g.set(Value::string("raise_exception"), make_native("raise_exception", [](Interpreter&, CallArgs& a) -> Value {
          Bound b = bind("raise_exception", a, {"message"});
          template_error(to_str(b[0]));
        }));
  g.set(Value::string("strftime_now"), make_native("strftime_now", [](Interpreter&, CallArgs& a) {
          Bound b = bind("strftime_now", a, {"format"});
          const std::string& fmt = need_str(b[0], "format");
          const std::time_t now = std::time(nullptr);
          std::tm tm{};
          localtime_r(&now, &tm);
          char buf[512];
          const size_t n = fmt.size() < 200 ? std::strftime(buf, sizeof buf, fmt.c_str(), &tm) : 0;
          if (n == 0 && !fmt.empty()) template_error("strftime_now: format produced no output or is too long");
          return Value::string(std::string(buf, n));
        }));
  g.set(Value::string("cycler"), make_native("cycler", [](Interpreter&, CallArgs& a) {
          auto state = std::make_shared<CyclerState>();
          state->items = a.positional;
          if (state->items.empty()) template_error("cycler needs at least one item");
          Dict obj;
          obj.set(Value::string("next"), make_native("next", [state](Interpreter&, CallArgs&) {
                    Value v = state->items[state->pos];
                    state->pos = (state->pos + 1) % state->items.size();
                    return v;
                  }));
          obj.set(Value::string("reset"), make_native("reset", [state](Interpreter&, CallArgs&) {
                    state->pos = 0;
                    return Value::none();
                  }));
          obj.set(Value::string("current"), state->items[0]);
          return Value::dict(std::move(obj));
        }));
  g.set(Value::string("joiner"), make_native("joiner", [](Interpreter&, CallArgs& a) {
          Bound b = bind("joiner", a, {"sep"}, {Value::string(", ")});
          auto used = std::make_shared<bool>(false);
          const Value sep = b[0];
          return make_native("joiner", [used, sep](Interpreter&, CallArgs&) {
            if (!*used) {
              *used = true;
              return Value::string("");
            }
            return sep;
          });
        }));
  g.set(Value::string("lipsum"), make_native("lipsum", [](Interpreter&, CallArgs&) -> Value {
          template_error("lipsum() is not supported");
        }));
}

}  // namespace specserve::chat::jinja
