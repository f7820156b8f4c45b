// The template globals (range, dict, namespace, cycler, joiner, lipsum, raise_exception,
// strftime_now) and Python's printf-style `str % args`.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <memory>
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
        while (k < spec.size() && std::isdigit(static_cast<unsigned char>(spec[k])))
          width = width * 10 + static_cast<size_t>(spec[k++] - '0');
        if (k < spec.size() && spec[k] == '.') {
          precision = 0;
          ++k;
          while (k < spec.size() && std::isdigit(static_cast<unsigned char>(spec[k])))
            precision = precision * 10 + static_cast<size_t>(spec[k++] - '0');
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
        std::snprintf(buf, sizeof buf, (spec + "lld").c_str(),
                      static_cast<long long>(v.is_float() ? static_cast<int64_t>(v.as_double()) : v.as_int()));
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
  if (next < positional.size() && !mapping && args.is_tuple())
    template_error("not all arguments converted during string formatting");
  return out;
}

void add_globals(Dict& g) {
  g.set(Value::string("range"), make_native("range", [](Interpreter& interp, CallArgs& a) {
          if (!a.keyword.empty() || a.positional.empty() || a.positional.size() > 3)
            template_error("range expected 1 to 3 integer arguments");
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
          const double count = std::max(
              0.0, std::ceil((static_cast<double>(stop) - static_cast<double>(start)) / static_cast<double>(step)));
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
  g.set(Value::string("lipsum"),
        make_native("lipsum", [](Interpreter&, CallArgs&) -> Value { template_error("lipsum() is not supported"); }));
}

}  // namespace specserve::chat::jinja
