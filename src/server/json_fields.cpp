#include "server/json_fields.h"

#include <cmath>

#include <fmt/format.h>

#include "server/api_error.h"

namespace specserve::server {

namespace {
const char* type_name(const nlohmann::json& v) {
  return v.type_name();  // "null", "object", "array", "string", "boolean", "number"
}
}  // namespace

JsonFields::JsonFields(const nlohmann::json& obj, std::string path) : obj_(obj), path_(std::move(path)) {}

const nlohmann::json* JsonFields::any(const char* name) const {
  auto it = obj_.find(name);
  if (it == obj_.end() || it->is_null()) return nullptr;
  return &*it;
}

bool JsonFields::has(const char* name) const { return any(name) != nullptr; }

std::optional<std::string> JsonFields::string(const char* name) const {
  const auto* v = any(name);
  if (!v) return std::nullopt;
  if (!v->is_string())
    throw_bad_param(param(name), fmt::format("'{}' must be a string, got {}", param(name), type_name(*v)));
  return v->get<std::string>();
}

std::optional<bool> JsonFields::boolean(const char* name) const {
  const auto* v = any(name);
  if (!v) return std::nullopt;
  if (!v->is_boolean())
    throw_bad_param(param(name), fmt::format("'{}' must be a boolean, got {}", param(name), type_name(*v)));
  return v->get<bool>();
}

std::optional<int64_t> JsonFields::integer(const char* name, int64_t min, int64_t max) const {
  const auto* v = any(name);
  if (!v) return std::nullopt;
  int64_t out = 0;
  if (v->is_number_integer()) {
    if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      throw_bad_param(param(name), fmt::format("'{}' must be at most {}", param(name), max));
    }
    out = v->get<int64_t>();
  } else if (v->is_number_float()) {
    double d = v->get<double>();
    // Outside ±2^62 the cast would be undefined; such values are out of any range we accept anyway.
    if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 4.6e18) {
      throw_bad_param(param(name), fmt::format("'{}' must be an integer", param(name)));
    }
    out = static_cast<int64_t>(d);
  } else {
    throw_bad_param(param(name), fmt::format("'{}' must be an integer, got {}", param(name), type_name(*v)));
  }
  if (out < min || out > max) {
    throw_bad_param(param(name), fmt::format("'{}' must be between {} and {}, got {}", param(name), min, max, out));
  }
  return out;
}

std::optional<double> JsonFields::number(const char* name, double min, double max) const {
  const auto* v = any(name);
  if (!v) return std::nullopt;
  if (!v->is_number())
    throw_bad_param(param(name), fmt::format("'{}' must be a number, got {}", param(name), type_name(*v)));
  double d = v->get<double>();
  if (!std::isfinite(d) || d < min || d > max) {
    throw_bad_param(param(name), fmt::format("'{}' must be between {} and {}, got {}", param(name), min, max, d));
  }
  return d;
}

const nlohmann::json* JsonFields::object(const char* name) const {
  const auto* v = any(name);
  if (!v) return nullptr;
  if (!v->is_object())
    throw_bad_param(param(name), fmt::format("'{}' must be an object, got {}", param(name), type_name(*v)));
  return v;
}

const nlohmann::json* JsonFields::array(const char* name) const {
  const auto* v = any(name);
  if (!v) return nullptr;
  if (!v->is_array())
    throw_bad_param(param(name), fmt::format("'{}' must be an array, got {}", param(name), type_name(*v)));
  return v;
}

void require_object(const nlohmann::json& j, const std::string& what) {
  if (!j.is_object()) throw ApiError(400, fmt::format("{} must be a JSON object, got {}", what, j.type_name()));
}

nlohmann::json parse_json_body(const std::string& body) {
  if (body.empty()) throw ApiError(400, "request body is empty; expected a JSON object");
  // Depth guard: nlohmann recurses per nesting level; a body of 100k '[' would exhaust the stack.
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : body) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > 64) throw ApiError(400, "request body is nested too deeply (more than 64 levels)");
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  try {
    return nlohmann::json::parse(body);
  } catch (const nlohmann::json::exception& e) {
    // parse_error, or out_of_range.406 for a number that overflows a double ("1e999").
    // e.what() is "[json.exception.parse_error.101] parse error at line 1, column 5: ..."; keep the tail.
    std::string msg = e.what();
    auto pos = msg.find("] ");
    if (pos != std::string::npos) msg = msg.substr(pos + 2);
    throw ApiError(400, "could not parse the request body as JSON: " + msg);
  }
}

}  // namespace specserve::server
