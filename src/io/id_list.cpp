#include "io/id_list.h"

#include <charconv>
#include <cstddef>
#include <fstream>
#include <limits>
#include <sstream>

#include "core/error.h"
#include "io/printable.h"

namespace specserve {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == ','; }

}  // namespace

std::vector<int32_t> parse_id_list(std::string_view text) {
  std::vector<int32_t> ids;
  int line = 1;
  bool opened = false, closed = false;
  size_t i = 0;
  const auto where = [&](size_t at) { return quoted_name(text.substr(at), 16); };
  while (i < text.size()) {
    const char c = text[i];
    if (c == '\n') ++line;
    if (is_space(c)) {
      ++i;
    } else if (c == '#' && !opened) {
      while (i < text.size() && text[i] != '\n') ++i;
    } else if (c == '[') {
      SS_CHECK(!opened && ids.empty(), "id list, line {}: only one '[' may open the list", line);
      opened = true;
      ++i;
    } else if (c == ']') {
      SS_CHECK(opened && !closed, "id list, line {}: ']' without '['", line);
      closed = true;
      ++i;
    } else if (c >= '0' && c <= '9') {
      SS_CHECK(!closed, "id list, line {}: {} after the closing ']'", line, where(i));
      int64_t v = 0;
      const auto [end, ec] = std::from_chars(text.data() + i, text.data() + text.size(), v);
      const size_t n = static_cast<size_t>(end - (text.data() + i));
      SS_CHECK(ec == std::errc() && v <= std::numeric_limits<int32_t>::max(),
               "id list, line {}: {} is not a token id (0 to 2147483647)", line, where(i));
      SS_CHECK(i + n == text.size() || is_space(text[i + n]) || text[i + n] == ']',
               "id list, line {}: {} is not a token id", line, where(i));
      ids.push_back(static_cast<int32_t>(v));
      i += n;
    } else {
      fail("id list, line {}: unexpected {} (expected token ids separated by spaces, commas or lines)", line, where(i));
    }
  }
  SS_CHECK(opened == closed, "id list: '[' without ']'");
  return ids;
}

std::vector<int32_t> read_id_list(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read the id list {}", path);
  std::ostringstream text;
  text << in.rdbuf();
  try {
    return parse_id_list(text.str());
  } catch (const Error& e) {
    fail("{}: {}", path, e.what());
  }
}

}  // namespace specserve
