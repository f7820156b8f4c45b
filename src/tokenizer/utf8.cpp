#include "tokenizer/utf8.h"

namespace specserve::tokenizer {

namespace {

// Valid range of the second byte for a lead byte (Unicode Table 3-7); the other continuation
// bytes are always 0x80..0xBF. Returns the sequence length, or 0 for a byte that cannot lead.
int sequence_length(unsigned char b0, unsigned char& lo, unsigned char& hi) {
  lo = 0x80;
  hi = 0xBF;
  if (b0 < 0x80) return 1;
  if (b0 < 0xC2) return 0;
  if (b0 < 0xE0) return 2;
  if (b0 < 0xF0) {
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
    return 3;
  }
  if (b0 < 0xF5) {
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;  // <= U+10FFFF
    return 4;
  }
  return 0;
}

}  // namespace

uint32_t decode_utf8(std::string_view s, size_t i, size_t& len, bool& ok) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  unsigned char lo, hi;
  const int need = sequence_length(p[i], lo, hi);
  ok = false;
  len = 1;
  if (need == 1) {
    ok = true;
    return p[i];
  }
  if (need == 0) return kReplacementChar;
  uint32_t cp = p[i] & (0x7F >> need);
  for (int k = 1; k < need; ++k) {
    if (i + k >= n) return kReplacementChar;  // truncated: the subpart so far is one U+FFFD
    const unsigned char b = p[i + k];
    const unsigned char l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
    if (b < l || b > h) return kReplacementChar;
    cp = (cp << 6) | (b & 0x3F);
    len = k + 1;
  }
  ok = true;
  return cp;
}

bool is_valid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    // ASCII fast path, 8 bytes at a time.
    while (i + 8 <= n) {
      uint64_t w;
      __builtin_memcpy(&w, p + i, 8);
      if (w & 0x8080808080808080ULL) break;
      i += 8;
    }
    if (i >= n) break;
    if (p[i] < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    bool ok;
    decode_utf8(s, i, len, ok);
    if (!ok) return false;
    i += len;
  }
  return true;
}

std::string repair_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    size_t len;
    bool ok;
    const uint32_t cp = decode_utf8(s, i, len, ok);
    if (ok) {
      out.append(s.data() + i, len);
    } else {
      append_utf8(out, cp);
    }
    i += len;
  }
  return out;
}

size_t utf8_stable_prefix(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  // A still-incomplete sequence is at most 3 bytes long and starts at a lead byte.
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const size_t start = n - back;
    unsigned char lo, hi;
    const int need = sequence_length(p[start], lo, hi);
    if (need == 0 || need == 1) {
      if (p[start] >= 0x80 && p[start] <= 0xBF) continue;  // continuation byte: look further back
      return n;                                            // ASCII or invalid lead: nothing held
    }
    if (static_cast<size_t>(need) <= back) return n;  // complete (or already decided) sequence
    for (size_t k = 1; k < back; ++k) {
      const unsigned char b = p[start + k];
      const unsigned char l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
      if (b < l || b > h) return n;  // already ill-formed: decided
    }
    return start;  // well-formed so far and incomplete: hold it back
  }
  return n;
}

}  // namespace specserve::tokenizer
