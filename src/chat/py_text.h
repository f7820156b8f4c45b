#pragma once
#include "core/utf8_encode.h"
// Python text semantics the chat templates rely on (transformers renders them with Python
// Jinja2): code-point indexing of UTF-8 strings, str.isspace / lower / upper, repr() of strings
// and floats, and json.dumps with the options transformers' tojson exposes.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace specserve::chat::py {

// UTF-8 <-> code points (invalid bytes decode as U+FFFD; templates only see valid text).
std::vector<uint32_t> code_points(std::string_view s);
std::string from_code_points(const std::vector<uint32_t>& cps, size_t begin, size_t end);
using ::specserve::append_utf8;
size_t length(std::string_view s);  // number of code points

bool isspace(uint32_t cp);  // str.isspace(): bidi WS/B/S or category Zs
bool isalpha(uint32_t cp);
bool isdigit(uint32_t cp);
bool isdecimal(uint32_t cp);
bool isnumeric(uint32_t cp);
bool islower_cased(uint32_t cp);  // has lowercase property
bool isupper_cased(uint32_t cp);
uint32_t to_lower(uint32_t cp);
uint32_t to_upper(uint32_t cp);
std::string lower(std::string_view s);
std::string upper(std::string_view s);
bool is_printable(uint32_t cp);  // str.isprintable() for one char

// str.strip / lstrip / rstrip: with chars == nullptr, Python whitespace.
std::string strip(std::string_view s, const std::string* chars, bool left, bool right);

// repr() of a str, choosing quotes as Python does.
std::string repr_string(std::string_view s);
// repr() / str() of a float ('1.0', '1e+16', '0.0001', 'inf', 'nan').
std::string repr_float(double d);
// json.dumps of a string body with ensure_ascii (quotes included).
std::string json_string(std::string_view s, bool ensure_ascii);
// json.dumps of a float ('NaN', 'Infinity' for the non-finite ones).
std::string json_float(double d);

}  // namespace specserve::chat::py
