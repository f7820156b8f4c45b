#pragma once
// GPT-2's reversible byte <-> unicode map (bytes_to_unicode): printable bytes map to themselves,
// the other 68 (0x00-0x20, 0x7F-0xA0, 0xAD) to U+0100.. in increasing byte order.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace specserve::tokenizer {

class ByteLevelMap {
 public:
  static const ByteLevelMap& get();

  uint32_t byte_to_char(uint8_t b) const { return byte_to_char_[b]; }
  // The byte a char stands for, if it is one of the 256 byte chars.
  std::optional<uint8_t> char_to_byte(uint32_t cp) const {
    if (cp >= char_to_byte_.size() || char_to_byte_[cp] < 0) return std::nullopt;
    return static_cast<uint8_t>(char_to_byte_[cp]);
  }
  // Bytes of a byte-level token string ("Ġhello" -> " hello"); nullopt when a char is not a byte
  // char (such a token can never come out of byte-level BPE).
  std::optional<std::string> decode_token(std::string_view token) const;
  // HF ByteLevel decoder rule for one token: its bytes, or its raw UTF-8 when a char is unmapped.
  std::string decoder_bytes(std::string_view token) const;
  // Byte-level string of raw bytes (" hi" -> "Ġhi").
  std::string encode_bytes(std::string_view bytes) const;

 private:
  ByteLevelMap();
  std::array<uint32_t, 256> byte_to_char_{};
  std::array<int16_t, 0x144> char_to_byte_{};
};

}  // namespace specserve::tokenizer
