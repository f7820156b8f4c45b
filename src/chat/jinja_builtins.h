#pragma once
// Jinja2's built-in filters, tests and globals, Python's str / dict / list methods, and the
// chat-template extras of transformers (tojson as json.dumps, raise_exception, strftime_now).
#include <string>

#include "chat/jinja_value.h"

namespace specserve::chat::jinja {

class Interpreter;

bool is_known_filter(const std::string& name);
bool is_known_test(const std::string& name);

Value apply_filter(Interpreter& interp, const std::string& name, const Value& value, CallArgs args);
bool apply_test(Interpreter& interp, const std::string& name, const Value& value, CallArgs args);

// `obj.name` as Jinja's sandboxed getattr sees it: a bound method for str / dict / list methods
// (Undefined when the type has no such attribute), or nullopt-like Undefined.
Value get_method(const Value& self, const std::string& name);

// The global functions of the template environment: range, dict, namespace, cycler, joiner,
// lipsum, raise_exception, strftime_now.
void add_globals(Dict& globals);

// Python `a % b` on a str (printf-style formatting), used by the `%` operator and |format.
std::string percent_format(const std::string& fmt, const Value& args);

}  // namespace specserve::chat::jinja
