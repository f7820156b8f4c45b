#include "sampling/stop_strings.h"

#include <algorithm>

namespace specserve::sampling {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
  for (const auto& s : stops_) max_length_ = std::max(max_length_, s.size());
}

std::optional<StopStringMatcher::Match> StopStringMatcher::find_new(std::string_view text, size_t old_size) const {
  std::optional<Match> best;
  for (size_t i = 0; i < stops_.size(); ++i) {
    const std::string& s = stops_[i];
    if (s.empty() || s.size() > text.size()) continue;
    // A match ending after old_size begins at or after old_size − (|s| − 1).
    const size_t from = old_size + 1 > s.size() ? old_size + 1 - s.size() : 0;
    const size_t at = text.find(s, from);
    if (at != std::string_view::npos && (!best || at < best->begin)) best = Match{at, i};
  }
  return best;
}

size_t StopStringMatcher::partial_suffix(std::string_view text) const {
  // Longest first: a suffix of length k is held if it equals the first k bytes of some stop.
  const size_t longest = std::min(text.size(), max_length_ > 0 ? max_length_ - 1 : 0);
  for (size_t k = longest; k > 0; --k) {
    const std::string_view tail = text.substr(text.size() - k);
    for (const auto& s : stops_) {
      if (s.size() > k && s.compare(0, k, tail) == 0) return k;
    }
  }
  return 0;
}

size_t incomplete_utf8_suffix(std::string_view text) {
  // Walk back over at most 3 continuation bytes to the lead byte of the last character.
  const size_t n = text.size();
  for (size_t back = 1; back <= std::min<size_t>(4, n); ++back) {
    const auto c = static_cast<unsigned char>(text[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte
    const size_t need = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
    return need > back ? back : 0;
  }
  return 0;  // only continuation bytes: not a sequence we can complete, send as is
}

}  // namespace specserve::sampling
