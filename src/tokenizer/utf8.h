#pragma once
#include "core/utf8_encode.h"
// UTF-8 decoding and encoding, and lossy repair of invalid byte sequences the way Rust's
// String::from_utf8_lossy and Python's bytes.decode("utf-8", "replace") do it (each maximal
// subpart of an ill-formed sequence becomes one U+FFFD).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace specserve::tokenizer {

inline constexpr uint32_t kReplacementChar = 0xFFFD;

// Decodes the code point starting at s[i] (i < s.size()). On success returns the code point and
// sets len to its byte length (1-4). On an ill-formed sequence returns kReplacementChar and sets
// len to the length of its maximal subpart (>= 1), so that decoding can resume after it.
uint32_t decode_utf8(std::string_view s, size_t i, size_t& len, bool& ok);

// Fast forward decode of valid UTF-8 (the caller guarantees validity).
inline uint32_t decode_valid_utf8(const unsigned char* p, size_t& len) {
  const uint32_t b0 = p[0];
  if (b0 < 0x80) {
    len = 1;
    return b0;
  }
  if (b0 < 0xE0) {
    len = 2;
    return ((b0 & 0x1F) << 6) | (p[1] & 0x3F);
  }
  if (b0 < 0xF0) {
    len = 3;
    return ((b0 & 0x0F) << 12) | ((p[1] & 0x3F) << 6) | (p[2] & 0x3F);
  }
  len = 4;
  return ((b0 & 0x07) << 18) | ((p[1] & 0x3F) << 12) | ((p[2] & 0x3F) << 6) | (p[3] & 0x3F);
}

using ::specserve::append_utf8;

// True when the bytes are well-formed UTF-8 (no surrogates, no overlongs, <= U+10FFFF).
bool is_valid_utf8(std::string_view s);

// Returns s with every maximal ill-formed subpart replaced by U+FFFD.
std::string repair_utf8(std::string_view s);

// For streaming: the length of the longest prefix of s after which no later bytes can change how
// the prefix decodes, i.e. s minus a trailing, still-incomplete (but so far well-formed) sequence.
size_t utf8_stable_prefix(std::string_view s);

}  // namespace specserve::tokenizer
