#pragma once
// JSON parsing for the io layer (safetensors headers, config.json, index files): syntax errors and
// duplicate keys become one-line specserve::Error messages. Internal to src/io.
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>

namespace specserve {

struct DuplicateKey {
  std::string key;
  int depth = 0;  // 1 for a key of the top-level object
};

// Parses `text`. Syntax errors throw Error("<what> is not valid JSON: <reason>"). A key that appears
// twice in one object (which nlohmann would resolve silently, keeping the last) is reported through
// `duplicate` when given, else thrown as Error("<what>: duplicate key '<key>'").
nlohmann::json parse_json(std::string_view text, std::string_view what,
                          std::optional<DuplicateKey>* duplicate = nullptr);

// "an object", "an array", "a string", "an integer", "null", ... for messages about ill-typed values.
std::string json_type_name(const nlohmann::json& j);

}  // namespace specserve
