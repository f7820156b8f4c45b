#pragma once
// Typed, validating access to the fields of a JSON request object. Unknown fields are ignored
// (clients send extensions we do not know); a known field with the wrong type or out of range is
// a 400 naming the field, never an exception from deep inside the JSON library. `null` counts as
// absent, as the OpenAI API treats it.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace specserve::server {

class JsonFields {
 public:
  // `obj` must outlive this reader. `path` prefixes parameter names in errors ("stream_options.").
  JsonFields(const nlohmann::json& obj, std::string path = "");

  bool has(const char* name) const;  // present and not null
  std::optional<std::string> string(const char* name) const;
  std::optional<bool> boolean(const char* name) const;
  // Integers: JSON integers, or floats with an integral value (some clients send 16.0).
  std::optional<int64_t> integer(const char* name, int64_t min, int64_t max) const;
  std::optional<double> number(const char* name, double min, double max) const;
  const nlohmann::json* object(const char* name) const;  // nullptr when absent
  const nlohmann::json* array(const char* name) const;   // nullptr when absent
  // Any present value (for fields that accept several types); nullptr when absent.
  const nlohmann::json* any(const char* name) const;

  std::string param(const char* name) const { return path_ + name; }

 private:
  const nlohmann::json& obj_;
  std::string path_;
};

// Requires `j` to be an object; otherwise 400 naming `what`.
void require_object(const nlohmann::json& j, const std::string& what);

// Parses a request body; bad JSON (including invalid UTF-8 and truncation) → 400.
nlohmann::json parse_json_body(const std::string& body);

}  // namespace specserve::server
