#include "tokenizer/byte_level.h"

#include "tokenizer/utf8.h"

namespace specserve::tokenizer {

ByteLevelMap::ByteLevelMap() {
  char_to_byte_.fill(-1);
  uint32_t next = 0x100;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    const uint32_t cp = printable ? static_cast<uint32_t>(b) : next++;
    byte_to_char_[b] = cp;
    char_to_byte_[cp] = static_cast<int16_t>(b);
  }
}

const ByteLevelMap& ByteLevelMap::get() {
  static const ByteLevelMap map;
  return map;
}

std::optional<std::string> ByteLevelMap::decode_token(std::string_view token) const {
  std::string out;
  out.reserve(token.size());
  size_t i = 0;
  while (i < token.size()) {
    size_t len;
    bool ok;
    const uint32_t cp = decode_utf8(token, i, len, ok);
    if (!ok) return std::nullopt;
    const auto b = char_to_byte(cp);
    if (!b) return std::nullopt;
    out.push_back(static_cast<char>(*b));
    i += len;
  }
  return out;
}

std::string ByteLevelMap::decoder_bytes(std::string_view token) const {
  if (auto bytes = decode_token(token)) return *bytes;
  return std::string(token);
}

std::string ByteLevelMap::encode_bytes(std::string_view bytes) const {
  std::string out;
  for (unsigned char b : bytes) append_utf8(out, byte_to_char_[b]);
  return out;
}

}  // namespace specserve::tokenizer
