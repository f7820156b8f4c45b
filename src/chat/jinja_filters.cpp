// Jinja2's built-in filters (plus transformers' tojson as json.dumps), with the semantics of
// Jinja2 3.1 in transformers' sandboxed chat-template environment.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <string>
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
    const bool numeric =
        !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
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
    if (!b[2].is_sequence_like() || b[2].items().size() != 2)
      template_error("tojson: separators must be a pair of strings");
    o.item_separator = need_str(b[2].items()[0], "separator");
    o.key_separator = need_str(b[2].items()[1], "separator");
  }
  o.sort_keys = json_bool_arg(b[3]);
  return Value::string(to_json(value, o));
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

std::vector<Value> select_items(Interpreter& interp, const Value& seq, CallArgs& args, bool keep_matching,
                                bool by_attr) {
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
    m["select"] = [](Interpreter& interp, const Value& v, CallArgs& a) {
      return Value::list(select_items(interp, v, a, true, false));
    };
    m["reject"] = [](Interpreter& interp, const Value& v, CallArgs& a) {
      return Value::list(select_items(interp, v, a, false, false));
    };
    m["selectattr"] = [](Interpreter& interp, const Value& v, CallArgs& a) {
      return Value::list(select_items(interp, v, a, true, true));
    };
    m["rejectattr"] = [](Interpreter& interp, const Value& v, CallArgs& a) {
      return Value::list(select_items(interp, v, a, false, true));
    };
    m["sort"] = [](Interpreter&, const Value& v, CallArgs& a) {
      Bound b = bind("sort", a, {"reverse", "case_sensitive", "attribute"},
                     {Value::boolean(false), Value::boolean(false), Value::none()});
      auto items = iterate(v);
      const bool cs = truthy(b[1]);
      const std::string attr = b[2].is_none() ? "" : soft_str(b[2]);
      auto key = [&](const Value& x) { return sort_key(attr.empty() ? x : attribute_of(x, attr), cs); };
      std::stable_sort(items.begin(), items.end(),
                       [&](const Value& x, const Value& y) { return less_than(key(x), key(y)); });
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
      Bound b = bind("dictsort", a, {"case_sensitive", "by", "reverse"},
                     {Value::boolean(false), Value::string("key"), Value::boolean(false)});
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
      for (const auto& item : iterate(v))
        total = binary_op("+", total, b[0].is_none() ? item : attribute_of(item, soft_str(b[0])), interp);
      return total;
    };
    auto minmax = [](bool want_max) {
      return [want_max](Interpreter&, const Value& v, CallArgs& a) {
        Bound b =
            bind(want_max ? "max" : "min", a, {"case_sensitive", "attribute"}, {Value::boolean(false), Value::none()});
        const auto items = iterate(v);
        if (items.empty()) return Value::undefined(std::string("No aggregated item, sequence was empty."));
        const Value* best = &items[0];
        auto key = [&](const Value& x) {
          return sort_key(b[1].is_none() ? x : attribute_of(x, soft_str(b[1])), truthy(b[0]));
        };
        for (const auto& x : items) {
          if (want_max ? less_than(key(*best), key(x)) : less_than(key(x), key(*best))) best = &x;
        }
        return *best;
      };
    };
    m["max"] = minmax(true);
    m["min"] = minmax(false);
    m["indent"] = [](Interpreter&, const Value& v, CallArgs& a) {
      Bound b = bind("indent", a, {"width", "first", "blank"},
                     {Value::integer(4), Value::boolean(false), Value::boolean(false)});
      const std::string ind =
          b[0].is_string()
              ? b[0].str()
              : std::string(static_cast<size_t>(std::clamp<int64_t>(need_int(b[0], "width"), 0, 1024)), ' ');
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
      if (!a.keyword.empty() && !a.positional.empty())
        template_error("can't handle positional and keyword arguments at the same time");
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

}  // namespace

bool is_known_filter(const std::string& name) { return filters().count(name) > 0; }

Value apply_filter(Interpreter& interp, const std::string& name, const Value& value, CallArgs args) {
  return run_filter(interp, name, value, std::move(args));
}

}  // namespace specserve::chat::jinja
