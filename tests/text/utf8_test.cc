#include "text/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace tailcut {
namespace {

// What Python's bytes.decode("utf-8", "replace") gives, re-encoded; "?" marks U+FFFD here.
std::string Repair(std::string_view in) {
  std::string out;
  AppendUtf8Replacing(in, out);
  std::string shown;
  for (size_t i = 0; i < out.size();) {
    if (out.compare(i, 3, "\xEF\xBF\xBD") == 0) {
      shown.push_back('?');
      i += 3;
    } else {
      shown.push_back(out[i++]);
    }
  }
  return shown;
}

TEST(Utf8Test, ValidTextIsUnchanged) {
  EXPECT_EQ(Repair("plain ascii"), "plain ascii");
  EXPECT_EQ(Repair("caf\xC3\xA9 \xE4\xB8\xAD \xF0\x9F\x98\x80"),
            "caf\xC3\xA9 \xE4\xB8\xAD \xF0\x9F\x98\x80");
  EXPECT_TRUE(ScanUtf8("caf\xC3\xA9").valid);
  EXPECT_FALSE(ScanUtf8("caf\xC3\xA9").ascii);
  EXPECT_TRUE(ScanUtf8("cafe").ascii);
  EXPECT_TRUE(ScanUtf8("").valid);
}

TEST(Utf8Test, LiteralReplacementCharacterIsValid) {
  EXPECT_TRUE(ScanUtf8("a\xEF\xBF\xBD"
                       "b")
                  .valid);
}

TEST(Utf8Test, EachMaximalInvalidSubpartBecomesOneReplacement) {
  // Stray continuation bytes and bytes that never start a sequence: one each.
  EXPECT_EQ(Repair("a\x80"
                   "b"),
            "a?b");
  EXPECT_EQ(Repair("\x80\x80"), "??");
  EXPECT_EQ(Repair("\xFF\xFE"), "??");
  EXPECT_EQ(Repair("\xF5\x80"), "??");
  // Overlong forms: C0/C1 are never valid leads; E0 80 fails at the second byte.
  EXPECT_EQ(Repair("\xC0\xAF"), "??");
  EXPECT_EQ(Repair("\xE0\x80\xAF"), "???");
  EXPECT_EQ(Repair("\xF0\x80\x80\xAF"), "????");
  // Surrogates (ED A0..BF) and values above U+10FFFF (F4 90..).
  EXPECT_EQ(Repair("\xED\xA0\x80"), "???");
  EXPECT_EQ(Repair("\xF4\x90\x80\x80"), "????");
  // Truncated sequences: the valid prefix is one subpart.
  EXPECT_EQ(Repair("\xE2\x82"), "?");
  EXPECT_EQ(Repair("\xF0\x9F\x98"), "?");
  EXPECT_EQ(Repair("\xF0\x9F\x98"
                   "A"),
            "?A");
  EXPECT_EQ(Repair("\xE2\x82\xE2\x82\xAC"), "?\xE2\x82\xAC");
  EXPECT_EQ(Repair("\xC3"), "?");
  EXPECT_EQ(Repair("x\xC3"), "x?");
  // Largest valid values on each length boundary stay.
  EXPECT_EQ(Repair("\xDF\xBF\xEF\xBF\xBF\xF4\x8F\xBF\xBF"), "\xDF\xBF\xEF\xBF\xBF\xF4\x8F\xBF\xBF");
  EXPECT_FALSE(ScanUtf8("ok\xC3").valid);
}

TEST(Utf8Test, DecodeCharReportsLengthAndValue) {
  char32_t cp = 0;
  const auto* euro = reinterpret_cast<const unsigned char*>("\xE2\x82\xAC");
  EXPECT_EQ(DecodeUtf8Char(euro, 3, &cp), 3u);
  EXPECT_EQ(cp, U'\u20AC');
  EXPECT_EQ(DecodeUtf8Char(euro, 2, &cp), 2u);
  EXPECT_EQ(cp, kReplacementChar);
}

TEST(Utf8Test, EncodeRoundTrips) {
  for (char32_t cp : {U'\0', U'A', U'\u00E9', U'\u07FF', U'\u0800', U'\uFFFD', U'\U00010000',
                      U'\U0001F600', U'\U0010FFFF'}) {
    std::string s;
    AppendUtf8(cp, s);
    size_t i = 0;
    EXPECT_EQ(DecodeValidUtf8(s, &i), cp);
    EXPECT_EQ(i, s.size());
    EXPECT_TRUE(ScanUtf8(s).valid);
  }
}

TEST(Utf8Test, IsAscii) {
  EXPECT_TRUE(IsAscii(""));
  EXPECT_TRUE(IsAscii("0123456789abcdefghij"));
  EXPECT_FALSE(IsAscii("0123456789abcdefghi\xC3\xA9"));
  EXPECT_FALSE(IsAscii("\x80"));
}

}  // namespace
}  // namespace tailcut
