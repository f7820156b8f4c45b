#include "io/json_parse.h"

#include <set>
#include <vector>

#include "core/error.h"
#include "io/printable.h"

namespace specserve {

namespace {
// nlohmann messages start with "[json.exception.parse_error.101] "; the id helps nobody reading a
// CLI error. Newlines cannot occur in them today, but the message must stay one line regardless.
std::string one_line_reason(const char* what) {
  std::string s = what;
  if (!s.empty() && s[0] == '[') {
    size_t close = s.find("] ");
    if (close != std::string::npos) s.erase(0, close + 2);
  }
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}
}  // namespace

nlohmann::json parse_json(std::string_view text, std::string_view what, std::optional<DuplicateKey>* duplicate) {
  using json = nlohmann::json;
  std::vector<std::set<std::string>> open_objects;  // keys seen so far, per enclosing object
  std::optional<DuplicateKey> first_duplicate;
  auto track_keys = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) {
      open_objects.emplace_back();
    } else if (event == json::parse_event_t::object_end) {
      if (!open_objects.empty()) open_objects.pop_back();
    } else if (event == json::parse_event_t::key && !open_objects.empty()) {
      const auto& key = parsed.get_ref<const std::string&>();
      if (!open_objects.back().insert(key).second && !first_duplicate)
        first_duplicate = DuplicateKey{key, static_cast<int>(open_objects.size())};
    }
    return true;
  };
  json value;
  try {
    value = json::parse(text.begin(), text.end(), track_keys);
  } catch (const json::exception& e) {
    fail("{} is not valid JSON: {}", what, one_line_reason(e.what()));
  }
  if (first_duplicate) {
    if (!duplicate) fail("{}: duplicate key {}", what, quoted_name(first_duplicate->key));
    *duplicate = std::move(first_duplicate);
  }
  return value;
}

std::string json_type_name(const nlohmann::json& j) {
  if (j.is_number_integer()) return "an integer";
  if (j.is_number_float()) return "a number";
  if (j.is_null()) return "null";
  if (j.is_array()) return "an array";
  if (j.is_object()) return "an object";
  return std::string("a ") + j.type_name();  // a string, a boolean, a binary
}

}  // namespace specserve
