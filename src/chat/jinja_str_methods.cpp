// Python str / dict / list methods as Jinja's sandbox exposes them (`obj.name(...)`), with the
// semantics of Jinja2 3.1 in transformers' sandboxed chat-template environment.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/jinja_builtins.h"
#include "chat/jinja_builtin_util.h"
#include "chat/jinja_interpreter.h"
#include "chat/py_text.h"
#include "core/error.h"

namespace specserve::chat::jinja {

using namespace detail;

namespace {

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
}  // namespace

namespace detail {

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

}  // namespace detail

namespace {

// Code-point index of a byte offset.
int64_t cp_index(const std::string& s, size_t byte_offset) {
  return static_cast<int64_t>(py::length(std::string_view(s).substr(0, byte_offset)));
}

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

}  // namespace

namespace detail {

std::string py_capitalize(const std::string& s) {
  std::string out;
  bool first = true;
  for (uint32_t cp : py::code_points(s)) {
    py::append_utf8(out, first ? py::to_upper(cp) : py::to_lower(cp));
    first = false;
  }
  return out;
}

}  // namespace detail

namespace {

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
      if (field.find_first_of(":!") != std::string::npos)
        template_error("format specs are not supported in str.format");
      Value v;
      if (field.empty()) {
        if (auto_index >= args.positional.size())
          template_error("Replacement index out of range for positional args tuple");
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

}  // namespace

namespace detail {

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
    return str_value(
        replace_all(s, need_str(b[0], "replace arg 1"), need_str(b[1], "replace arg 2"), need_int(b[2], "count")),
        self);
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
    if (m == "removeprefix" && s.compare(0, a.size(), a) == 0 && s.size() >= a.size())
      return str_value(s.substr(a.size()), self);
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

}  // namespace detail

namespace {

const std::set<std::string>& str_methods() {
  static const std::set<std::string> m = {
      "strip",   "lstrip",    "rstrip",    "startswith", "endswith",  "split",        "rsplit",       "splitlines",
      "lower",   "upper",     "title",     "capitalize", "swapcase",  "casefold",     "replace",      "find",
      "rfind",   "index",     "rindex",    "count",      "join",      "isdigit",      "isalpha",      "isalnum",
      "isspace", "isdecimal", "isnumeric", "islower",    "isupper",   "removeprefix", "removesuffix", "zfill",
      "center",  "ljust",     "rjust",     "format",     "partition", "rpartition"};
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

}  // namespace

Value get_method(const Value& self, const std::string& name) {
  if (self.is_string()) {
    if (str_methods().count(name)) return Value::callable(std::make_shared<BoundMethod>(self, name));
    return Value::undefined();
  }
  if (self.is_dict()) {
    static const std::set<std::string> dict_methods = {"items",   "keys",   "values",     "get",   "copy",    "pop",
                                                       "popitem", "update", "setdefault", "clear", "fromkeys"};
    if (dict_methods.count(name)) return Value::callable(std::make_shared<BoundMethod>(self, name));
    return Value::undefined();
  }
  if (self.is_sequence_like()) {
    static const std::set<std::string> list_methods = {"count",  "index",   "append", "extend", "insert", "pop",
                                                       "remove", "reverse", "sort",   "clear",  "copy"};
    if (list_methods.count(name) && !(self.is_tuple() && name != "count" && name != "index")) {
      return Value::callable(std::make_shared<BoundMethod>(self, name));
    }
  }
  return Value::undefined();
}

}  // namespace specserve::chat::jinja
