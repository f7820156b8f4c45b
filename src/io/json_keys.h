#pragma once
// Typed, path-aware access to the keys of a JSON object (config.json and friends). Every error names
// the full key path ("text_config.rope_parameters.rope_theta") so a user can find it in the file.
// A key whose value is null counts as absent, as in transformers. Internal to src/io.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace specserve {

class JsonKeys {
 public:
  // `path` is the key path of `object` itself ("" for the root, "text_config", ...).
  JsonKeys(const nlohmann::json& object, std::string path);

  const std::string& path() const { return path_; }
  std::string key_path(std::string_view key) const;  // "text_config.hidden_size"
  bool has(std::string_view key) const;              // present and not null
  std::vector<std::string> keys() const;             // every key of the object, null-valued ones included

  // Required values: Error "missing key 'p'" or "key 'p' must be ..., found ...".
  int64_t integer(std::string_view key) const;
  int positive_int(std::string_view key) const;  // 1 ≤ value ≤ INT_MAX
  double number(std::string_view key) const;     // integer or float
  std::string string(std::string_view key) const;
  JsonKeys object(std::string_view key) const;

  // Optional values: nullopt (or the default) when absent or null; ill-typed is still an Error.
  std::optional<int64_t> opt_integer(std::string_view key) const;
  std::optional<int> opt_positive_int(std::string_view key) const;
  std::optional<double> opt_number(std::string_view key) const;
  std::optional<std::string> opt_string(std::string_view key) const;
  std::optional<JsonKeys> opt_object(std::string_view key) const;
  bool boolean(std::string_view key, bool default_value) const;
  // An integer or a list of integers ("eos_token_id": 2 or [1, 2]); empty when absent.
  std::vector<int64_t> int_or_int_list(std::string_view key) const;
  // A list of strings / non-negative integers; nullopt when absent.
  std::optional<std::vector<std::string>> opt_string_list(std::string_view key) const;
  std::optional<std::vector<int64_t>> opt_int_list(std::string_view key) const;

 private:
  const nlohmann::json* find(std::string_view key) const;  // nullptr when absent or null
  const nlohmann::json& require(std::string_view key) const;
  [[noreturn]] void ill_typed(std::string_view key, std::string_view expected, const nlohmann::json& v) const;
  const nlohmann::json* object_;
  std::string path_;
};

}  // namespace specserve
