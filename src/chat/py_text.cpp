#include "chat/py_text.h"

#include <utf8proc.h>

#include <charconv>
#include <cmath>
#include <cstdio>

namespace specserve::chat::py {

namespace {

uint32_t decode_at(std::string_view s, size_t& i) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  const uint32_t b0 = p[i];
  int need;
  uint32_t cp;
  if (b0 < 0x80) {
    ++i;
    return b0;
  } else if (b0 >= 0xC2 && b0 < 0xE0) {
    need = 1;
    cp = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 < 0xF0) {
    need = 2;
    cp = b0 & 0x0F;
  } else if (b0 >= 0xF0 && b0 < 0xF5) {
    need = 3;
    cp = b0 & 0x07;
  } else {
    ++i;
    return 0xFFFD;
  }
  size_t j = i + 1;
  for (int k = 0; k < need; ++k, ++j) {
    if (j >= n || (p[j] & 0xC0) != 0x80) {
      i = j;
      return 0xFFFD;
    }
    cp = (cp << 6) | (p[j] & 0x3F);
  }
  i = j;
  return cp;
}

const utf8proc_property_t* prop(uint32_t cp) { return utf8proc_get_property(static_cast<utf8proc_int32_t>(cp)); }

}  // namespace

std::vector<uint32_t> code_points(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) out.push_back(decode_at(s, i));
  return out;
}

std::string from_code_points(const std::vector<uint32_t>& cps, size_t begin, size_t end) {
  std::string out;
  for (size_t i = begin; i < end; ++i) append_utf8(out, cps[i]);
  return out;
}

size_t length(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

bool isspace(uint32_t cp) {
  if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F);
  const auto* p = prop(cp);
  return p->category == UTF8PROC_CATEGORY_ZS || p->bidi_class == UTF8PROC_BIDI_CLASS_WS ||
         p->bidi_class == UTF8PROC_BIDI_CLASS_B || p->bidi_class == UTF8PROC_BIDI_CLASS_S;
}

bool isalpha(uint32_t cp) {
  const auto c = prop(cp)->category;
  return c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LL || c == UTF8PROC_CATEGORY_LT ||
         c == UTF8PROC_CATEGORY_LM || c == UTF8PROC_CATEGORY_LO;
}
bool isdecimal(uint32_t cp) { return prop(cp)->category == UTF8PROC_CATEGORY_ND; }
bool isdigit(uint32_t cp) {
  // Decimal digits plus the superscript / circled digits (Numeric_Type=Digit), approximated by No
  // characters whose NFKC form is a single decimal digit.
  if (isdecimal(cp)) return true;
  if (prop(cp)->category != UTF8PROC_CATEGORY_NO) return false;
  utf8proc_int32_t dst[4];
  int last = 0;
  const auto n = utf8proc_decompose_char(static_cast<utf8proc_int32_t>(cp), dst, 4, UTF8PROC_COMPAT, &last);
  return n == 1 && prop(static_cast<uint32_t>(dst[0]))->category == UTF8PROC_CATEGORY_ND;
}
bool isnumeric(uint32_t cp) {
  const auto c = prop(cp)->category;
  return c == UTF8PROC_CATEGORY_ND || c == UTF8PROC_CATEGORY_NL || c == UTF8PROC_CATEGORY_NO;
}
bool islower_cased(uint32_t cp) { return utf8proc_islower(static_cast<utf8proc_int32_t>(cp)); }
bool isupper_cased(uint32_t cp) { return utf8proc_isupper(static_cast<utf8proc_int32_t>(cp)); }
uint32_t to_lower(uint32_t cp) { return static_cast<uint32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))); }
uint32_t to_upper(uint32_t cp) { return static_cast<uint32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(cp))); }

std::string lower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (uint32_t cp : code_points(s)) append_utf8(out, to_lower(cp));
  return out;
}
std::string upper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (uint32_t cp : code_points(s)) append_utf8(out, to_upper(cp));
  return out;
}

bool is_printable(uint32_t cp) {
  if (cp == ' ') return true;
  const auto c = prop(cp)->category;
  switch (c) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS: return false;
    default: return true;
  }
}

std::string strip(std::string_view s, const std::string* chars, bool left, bool right) {
  const std::vector<uint32_t> cps = code_points(s);
  std::vector<uint32_t> set;
  if (chars) set = code_points(*chars);
  auto strippable = [&](uint32_t cp) {
    if (!chars) return isspace(cp);
    for (uint32_t c : set) {
      if (c == cp) return true;
    }
    return false;
  };
  size_t b = 0, e = cps.size();
  if (left) {
    while (b < e && strippable(cps[b])) ++b;
  }
  if (right) {
    while (e > b && strippable(cps[e - 1])) --e;
  }
  if (b == 0 && e == cps.size()) return std::string(s);
  return from_code_points(cps, b, e);
}

std::string repr_string(std::string_view s) {
  const std::vector<uint32_t> cps = code_points(s);
  bool has_single = false, has_double = false;
  for (uint32_t c : cps) {
    has_single |= c == '\'';
    has_double |= c == '"';
  }
  const char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  char buf[16];
  for (uint32_t c : cps) {
    if (c == static_cast<uint32_t>(quote) || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else if (c < 0x7F || is_printable(c)) {
      append_utf8(out, c);
    } else if (c <= 0xFF) {
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else if (c <= 0xFFFF) {
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      std::snprintf(buf, sizeof buf, "\\U%08x", c);
      out += buf;
    }
  }
  out.push_back(quote);
  return out;
}

std::string repr_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  // Shortest round-trip digits, then Python's float_repr_style='short' layout.
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  const size_t epos = sci.find('e');
  std::string mant = sci.substr(0, epos);
  const int exp10 = std::stoi(sci.substr(epos + 1));
  std::string digits;
  for (char c : mant) {
    if (c != '.') digits.push_back(c);
  }
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  const int decpt = exp10 + 1;  // value = 0.d1d2... * 10^decpt
  std::string out = sign;
  if (decpt <= -4 || decpt > 16) {
    out += digits[0];
    if (digits.size() > 1) out += "." + digits.substr(1);
    const int e = decpt - 1;
    std::snprintf(buf, sizeof buf, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
    out += buf;
  } else if (decpt <= 0) {
    out += "0." + std::string(static_cast<size_t>(-decpt), '0') + digits;
  } else if (static_cast<size_t>(decpt) >= digits.size()) {
    out += digits + std::string(static_cast<size_t>(decpt) - digits.size(), '0') + ".0";
  } else {
    out += digits.substr(0, static_cast<size_t>(decpt)) + "." + digits.substr(static_cast<size_t>(decpt));
  }
  return out;
}

std::string json_string(std::string_view s, bool ensure_ascii) {
  std::string out = "\"";
  char buf[16];
  for (uint32_t c : code_points(s)) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else if (ensure_ascii && c > 0x7F) {
          if (c >= 0x10000) {
            const uint32_t v = c - 0x10000;
            std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
          } else {
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
          }
          out += buf;
        } else {
          append_utf8(out, c);
        }
    }
  }
  out += "\"";
  return out;
}

std::string json_float(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return repr_float(d);
}

}  // namespace specserve::chat::py
