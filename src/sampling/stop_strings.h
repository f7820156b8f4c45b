#pragma once
// Stop strings in text that grows a token at a time. Two questions: did a stop string just
// complete (and where does it begin), and how much of the text's end could still turn into one
// (so a streaming response must hold it back rather than send it and be unable to take it back).
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace specserve::sampling {

class StopStringMatcher {
 public:
  StopStringMatcher() = default;
  explicit StopStringMatcher(std::vector<std::string> stops);

  struct Match {
    size_t begin = 0;       // byte offset of the stop string in the text
    size_t stop_index = 0;  // which stop string
  };

  // The earliest-beginning stop string in `text` that ends after byte `old_size` (text[0, old_size)
  // was searched before). Ties on the beginning go to the earlier-listed stop string.
  std::optional<Match> find_new(std::string_view text, size_t old_size) const;

  // The length of the longest suffix of `text` that is a proper prefix of some stop string.
  size_t partial_suffix(std::string_view text) const;

  bool empty() const { return stops_.empty(); }
  const std::string& stop(size_t i) const { return stops_[i]; }

 private:
  std::vector<std::string> stops_;
  size_t max_length_ = 0;
};

// How many trailing bytes of `text` are an incomplete UTF-8 sequence (0 if it ends on a character
// boundary), so streamed chunks never split a character.
size_t incomplete_utf8_suffix(std::string_view text);

}  // namespace specserve::sampling
