#pragma once
// Quoting of untrusted names (tensor names, JSON keys) for one-line error messages: control bytes
// are escaped and long names shortened, so a hostile file cannot forge or break up a log line.
#include <string>
#include <string_view>

namespace specserve {

// Returns 'name' in single quotes with bytes below 0x20 and 0x7f written as \xNN, shortened to at
// most `max_chars` characters of the name (then "...").
inline std::string quoted_name(std::string_view name, size_t max_chars = 160) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "'";
  size_t n = 0;
  for (unsigned char c : name) {
    if (n++ == max_chars) {
      out += "...";
      break;
    }
    if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "'";
}

}  // namespace specserve
