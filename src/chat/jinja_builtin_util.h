#pragma once
// Internal helpers shared by the Jinja built-ins (jinja_str_methods.cpp, jinja_filters.cpp,
// jinja_tests.cpp, jinja_globals.cpp): argument binding and checking, and the str helpers the
// filters reuse. Not part of the public API (see chat/jinja_builtins.h).
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "chat/jinja_value.h"

namespace specserve::chat::jinja::detail {

// ---- argument helpers -------------------------------------------------------------------------

// Binds positional and keyword arguments to named parameters (Python call semantics, no *args).
struct Bound {
  std::vector<Value> values;
  std::vector<bool> given;
  const Value& operator[](size_t i) const { return values[i]; }
  bool has(size_t i) const { return given[i]; }
};

Bound bind(const std::string& fn, CallArgs& args, std::initializer_list<const char*> names,
           std::initializer_list<Value> defaults = {});

const std::string& need_str(const Value& v, const std::string& what);
int64_t need_int(const Value& v, const std::string& what);
std::string soft_str(const Value& v);
Value str_value(std::string s, const Value& like);
std::string escape_html(const std::string& s);
size_t py_len(const Value& v);

// ---- Python str helpers (defined in jinja_str_methods.cpp) ------------------------------------

std::string replace_all(const std::string& s, const std::string& old, const std::string& repl, int64_t count);
std::string py_capitalize(const std::string& s);
Value call_str_method(const Value& self, const std::string& m, CallArgs args);

// ---- Python number helpers (the int / float / round filters) -----------------------------------

std::optional<int64_t> parse_py_int(std::string s, int base);
std::optional<double> parse_py_float(const std::string& s);
double py_round(double x, int64_t ndigits);

}  // namespace specserve::chat::jinja::detail
