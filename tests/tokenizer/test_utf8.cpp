#include <gtest/gtest.h>

#include "tokenizer/unicode.h"
#include "tokenizer/utf8.h"

namespace specserve::tokenizer {
namespace {

TEST(Utf8, Validity) {
  EXPECT_TRUE(is_valid_utf8(""));
  EXPECT_TRUE(is_valid_utf8("plain ascii text that is long enough for the 8-byte path"));
  EXPECT_TRUE(is_valid_utf8("é 的 😁 \xF4\x8F\xBF\xBF"));
  EXPECT_FALSE(is_valid_utf8("\xC0\x80"));          // overlong
  EXPECT_FALSE(is_valid_utf8("\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(is_valid_utf8("\xF4\x90\x80\x80"));  // > U+10FFFF
  EXPECT_FALSE(is_valid_utf8("\xE2\x82"));          // truncated
  EXPECT_FALSE(is_valid_utf8("\x80"));
  EXPECT_FALSE(is_valid_utf8("abcdefgh\xFF"));
}

TEST(Utf8, RepairReplacesMaximalSubparts) {
  // As Python's bytes.decode("utf-8", "replace") / Rust's from_utf8_lossy.
  EXPECT_EQ(repair_utf8("a\xE2\x82"
                        "b"),
            "a\uFFFD"
            "b");                                                // one U+FFFD for a truncated sequence
  EXPECT_EQ(repair_utf8("\xF0\x80\x80"), "\uFFFD\uFFFD\uFFFD");  // F0 80: invalid second byte
  EXPECT_EQ(repair_utf8("\xC0\xAF"), "\uFFFD\uFFFD");
  EXPECT_EQ(repair_utf8("\xED\xA0\x80"), "\uFFFD\uFFFD\uFFFD");
  EXPECT_EQ(repair_utf8("\xF0\x9F\x98"), "\uFFFD");
  EXPECT_EQ(repair_utf8("\xF0\x9F\x98\x81"), "😁");
  EXPECT_EQ(repair_utf8("\xFF\xFE"), "\uFFFD\uFFFD");
}

TEST(Utf8, StablePrefix) {
  EXPECT_EQ(utf8_stable_prefix("abc"), 3u);
  EXPECT_EQ(utf8_stable_prefix("ab\xF0\x9F"), 2u);
  EXPECT_EQ(utf8_stable_prefix("ab\xF0\x9F\x98"), 2u);
  EXPECT_EQ(utf8_stable_prefix("ab\xF0\x9F\x98\x81"), 6u);
  EXPECT_EQ(utf8_stable_prefix("ab\xE2"), 2u);
  EXPECT_EQ(utf8_stable_prefix("ab\xF0\x80"), 4u);  // already ill-formed: nothing to wait for
  EXPECT_EQ(utf8_stable_prefix("\x80\x80"), 2u);
  EXPECT_EQ(utf8_stable_prefix("\xC3"), 0u);
}

TEST(Unicode, Classes) {
  EXPECT_TRUE(char_class('a') & kLetter);
  EXPECT_TRUE(char_class(0x4E00) & kLetter);
  EXPECT_TRUE(char_class(0x0663) & kNumber);  // Arabic-Indic three
  EXPECT_TRUE(char_class(0x00BD) & kNumber);  // ½ (No)
  EXPECT_TRUE(char_class(0x0301) & kMark);
  EXPECT_TRUE(char_class(0x3000) & kWhitespace);
  EXPECT_TRUE(char_class(0x85) & kWhitespace);
  EXPECT_FALSE(char_class(0x180E) & kWhitespace);
  EXPECT_FALSE(char_class(0x200B) & kWhitespace);
  EXPECT_TRUE(char_class('_') & kWordChar);
  EXPECT_FALSE(char_class('-') & kWordChar);
  EXPECT_EQ(char_class(0x110000), 0);
}

TEST(Unicode, Normalization) {
  EXPECT_EQ(normalize("cafe\u0301", NormalForm::NFC), "caf\u00e9");
  EXPECT_EQ(normalize("caf\u00e9", NormalForm::NFD), "cafe\u0301");
  EXPECT_EQ(normalize("\uFF21\u2460", NormalForm::NFKC), "A1");
  EXPECT_EQ(normalize("\u212B", NormalForm::NFC), "\u00C5");
  EXPECT_EQ(normalize("\u1100\u1161\u11A8", NormalForm::NFC), "\uAC01");
  EXPECT_EQ(normalize(std::string("a\0b", 3), NormalForm::NFC), std::string("a\0b", 3));
}

}  // namespace
}  // namespace specserve::tokenizer
