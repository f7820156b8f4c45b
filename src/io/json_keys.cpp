#include "io/json_keys.h"

#include <climits>

#include "core/error.h"
#include "io/json_parse.h"

namespace specserve {

using json = nlohmann::json;

JsonKeys::JsonKeys(const json& object, std::string path) : object_(&object), path_(std::move(path)) {
  if (!object.is_object()) {
    if (path_.empty()) fail("expected a JSON object, found {}", json_type_name(object));
    fail("key '{}' must be an object, found {}", path_, json_type_name(object));
  }
}

std::string JsonKeys::key_path(std::string_view key) const {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

const json* JsonKeys::find(std::string_view key) const {
  auto it = object_->find(key);
  if (it == object_->end() || it->is_null()) return nullptr;
  return &*it;
}

bool JsonKeys::has(std::string_view key) const { return find(key) != nullptr; }

std::vector<std::string> JsonKeys::keys() const {
  std::vector<std::string> out;
  for (auto it = object_->begin(); it != object_->end(); ++it) out.push_back(it.key());
  return out;
}

const json& JsonKeys::require(std::string_view key) const {
  const json* v = find(key);
  if (!v) fail("missing key '{}'", key_path(key));
  return *v;
}

void JsonKeys::ill_typed(std::string_view key, std::string_view expected, const json& v) const {
  fail("key '{}' must be {}, found {}", key_path(key), expected, json_type_name(v));
}

int64_t JsonKeys::integer(std::string_view key) const {
  const json& v = require(key);
  if (!v.is_number_integer()) ill_typed(key, "an integer", v);
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    fail("key '{}' is out of range ({})", key_path(key), v.dump());
  return v.get<int64_t>();
}

int JsonKeys::positive_int(std::string_view key) const {
  int64_t x = integer(key);
  if (x < 1 || x > INT_MAX) fail("key '{}' must be a positive integer, found {}", key_path(key), x);
  return static_cast<int>(x);
}

double JsonKeys::number(std::string_view key) const {
  const json& v = require(key);
  if (!v.is_number()) ill_typed(key, "a number", v);
  return v.get<double>();
}

std::string JsonKeys::string(std::string_view key) const {
  const json& v = require(key);
  if (!v.is_string()) ill_typed(key, "a string", v);
  return v.get<std::string>();
}

JsonKeys JsonKeys::object(std::string_view key) const { return JsonKeys(require(key), key_path(key)); }

std::optional<int64_t> JsonKeys::opt_integer(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return integer(key);
}

std::optional<int> JsonKeys::opt_positive_int(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return positive_int(key);
}

std::optional<double> JsonKeys::opt_number(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return number(key);
}

std::optional<std::string> JsonKeys::opt_string(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return string(key);
}

std::optional<JsonKeys> JsonKeys::opt_object(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return object(key);
}

bool JsonKeys::boolean(std::string_view key, bool default_value) const {
  const json* v = find(key);
  if (!v) return default_value;
  if (!v->is_boolean()) ill_typed(key, "true or false", *v);
  return v->get<bool>();
}

std::vector<int64_t> JsonKeys::int_or_int_list(std::string_view key) const {
  const json* v = find(key);
  if (!v) return {};
  if (v->is_number_integer()) return {integer(key)};
  if (!v->is_array()) ill_typed(key, "an integer or a list of integers", *v);
  return *opt_int_list(key);
}

std::optional<std::vector<std::string>> JsonKeys::opt_string_list(std::string_view key) const {
  const json* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_array()) ill_typed(key, "a list of strings", *v);
  std::vector<std::string> out;
  for (size_t i = 0; i < v->size(); ++i) {
    if (!(*v)[i].is_string())
      fail("key '{}[{}]' must be a string, found {}", key_path(key), i, json_type_name((*v)[i]));
    out.push_back((*v)[i].get<std::string>());
  }
  return out;
}

std::optional<std::vector<int64_t>> JsonKeys::opt_int_list(std::string_view key) const {
  const json* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_array()) ill_typed(key, "a list of integers", *v);
  std::vector<int64_t> out;
  for (size_t i = 0; i < v->size(); ++i) {
    const json& e = (*v)[i];
    if (!e.is_number_integer() || (e.is_number_unsigned() && e.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)))
      fail("key '{}[{}]' must be an integer, found {}", key_path(key), i, json_type_name(e));
    out.push_back(e.get<int64_t>());
  }
  return out;
}

}  // namespace specserve
