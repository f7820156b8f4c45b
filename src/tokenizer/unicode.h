#pragma once
// Unicode character classes and normalisation forms, from utf8proc (Unicode 15): the classes the
// pre-tokenizer regexes use (\p{L}, \p{N}, \p{M}, \s) and the word / space tests of HF's added
// token matching. Nothing here is a hand-typed category table.
#include <cstdint>
#include <string>
#include <string_view>

namespace specserve::tokenizer {

enum CharClass : uint8_t {
  kLetter = 1,      // \p{L}
  kNumber = 2,      // \p{N}
  kMark = 4,        // \p{M}
  kWhitespace = 8,  // \s as Oniguruma and Rust define it: the White_Space property
  kWordChar = 16,   // Rust regex \w: Alphabetic, M, Nd, Pc, Join_Control
};

// Class bits of a code point (0 for code points beyond U+10FFFF).
uint8_t char_class(uint32_t cp);

enum class NormalForm { NFC, NFD, NFKC, NFKD };

// Normalises valid UTF-8 text. Text that is already ASCII is returned unchanged without work.
std::string normalize(std::string_view text, NormalForm form);

}  // namespace specserve::tokenizer
