#include "tokenizer/unicode.h"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>
#include <vector>

#include "core/error.h"

namespace specserve::tokenizer {

namespace {

// White_Space (PropList.txt) is exactly the separators Zs/Zl/Zp plus these controls.
bool is_white_space(uint32_t cp, utf8proc_category_t cat) {
  if ((cp >= 0x09 && cp <= 0x0D) || cp == 0x85) return true;
  return cat == UTF8PROC_CATEGORY_ZS || cat == UTF8PROC_CATEGORY_ZL || cat == UTF8PROC_CATEGORY_ZP;
}

// Other_Alphabetic code points outside the mark categories: the circled and squared Latin
// letters (category So). Together with L*, Nl and M* they make up Alphabetic as Rust's \w uses it.
bool is_other_alphabetic_symbol(uint32_t cp) {
  return (cp >= 0x24B6 && cp <= 0x24E9) || (cp >= 0x1F130 && cp <= 0x1F149) || (cp >= 0x1F150 && cp <= 0x1F169) ||
         (cp >= 0x1F170 && cp <= 0x1F189);
}

uint8_t compute_class(uint32_t cp) {
  const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  uint8_t c = 0;
  switch (cat) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO: c |= kLetter | kWordChar; break;
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME: c |= kMark | kWordChar; break;
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL: c |= kNumber | kWordChar; break;
    case UTF8PROC_CATEGORY_NO: c |= kNumber; break;
    case UTF8PROC_CATEGORY_PC: c |= kWordChar; break;
    default: break;
  }
  if (cp == 0x200C || cp == 0x200D || is_other_alphabetic_symbol(cp)) c |= kWordChar;
  if (is_white_space(cp, cat)) c |= kWhitespace;
  return c;
}

// One byte per code point (1.1 MB), built once from utf8proc on first use.
const std::vector<uint8_t>& class_table() {
  static const std::vector<uint8_t> table = [] {
    std::vector<uint8_t> t(0x110000);
    for (uint32_t cp = 0; cp < 0x110000; ++cp) t[cp] = compute_class(cp);
    return t;
  }();
  return table;
}

}  // namespace

uint8_t char_class(uint32_t cp) {
  static const uint8_t* table = class_table().data();
  return cp < 0x110000 ? table[cp] : 0;
}

std::string normalize(std::string_view text, NormalForm form) {
  bool ascii = true;
  for (unsigned char c : text) {
    if (c >= 0x80) {
      ascii = false;
      break;
    }
  }
  if (ascii) return std::string(text);
  int options = UTF8PROC_STABLE;
  switch (form) {
    case NormalForm::NFC: options |= UTF8PROC_COMPOSE; break;
    case NormalForm::NFD: options |= UTF8PROC_DECOMPOSE; break;
    case NormalForm::NFKC: options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    case NormalForm::NFKD: options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
  }
  utf8proc_uint8_t* out = nullptr;
  const auto n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()), static_cast<utf8proc_ssize_t>(text.size()),
                   &out, static_cast<utf8proc_option_t>(options));
  if (n < 0) fail("unicode normalisation failed: {}", utf8proc_errmsg(n));
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> holder(out, &std::free);
  return std::string(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
}

}  // namespace specserve::tokenizer
