#include "text/bert_normalizer.h"

#include <gtest/gtest.h>

#include <string>

#include "text/bert_pre_tokenizer.h"
#include "text/utf8.h"

namespace tailcut {
namespace {

std::string Normalize(std::string_view text, const BertNormalizerOptions& options = {}) {
  const BertNormalizer normalizer(options);
  std::vector<char32_t> out;
  std::vector<char32_t> scratch;
  normalizer.Normalize(text, out, scratch);
  std::string utf8;
  for (const char32_t cp : out) AppendUtf8(cp, utf8);
  return utf8;
}

std::vector<std::string> Words(std::string_view normalized_utf8) {
  std::vector<char32_t> cps;
  for (size_t i = 0; i < normalized_utf8.size();)
    cps.push_back(DecodeValidUtf8(normalized_utf8, &i));
  std::vector<std::string> words;
  BertPreTokenizer().ForEachWord(cps, [&](std::span<const char32_t> w) {
    std::string s;
    for (const char32_t cp : w) AppendUtf8(cp, s);
    words.push_back(s);
    return true;
  });
  return words;
}

TEST(BertNormalizerTest, LowercasesAndStripsAccents) {
  EXPECT_EQ(Normalize("Hello WORLD"), "hello world");
  EXPECT_EQ(Normalize("Caf\u00E9 na\u00EFve \u00C5ngstr\u00F6m"), "cafe naive angstrom");
  // Already-decomposed accents go too.
  EXPECT_EQ(Normalize("e\u0301"), "e");
}

TEST(BertNormalizerTest, CleanTextDropsControlsAndMapsWhitespace) {
  EXPECT_EQ(Normalize(std::string_view("a\0b", 3)), "ab");
  EXPECT_EQ(Normalize("a\x01"
                      "b\x7F"
                      "c"),
            "abc");
  // \v and \f are control characters first, so they vanish instead of separating words.
  EXPECT_EQ(Normalize("a\vb\fc"), "abc");
  EXPECT_EQ(Normalize("a\tb\nc\rd"), "a b c d");
  EXPECT_EQ(Normalize("a\u00A0b\u3000c\u2003d"), "a b c d");
  // Format characters (Cf): zero-width space/joiner, BOM, soft hyphen.
  EXPECT_EQ(Normalize("x\u200By\u200Dz\uFEFFw\u00ADv"), "xyzwv");
  EXPECT_EQ(Normalize("a\uFFFDb"), "ab");
  // Private use is "other" too.
  EXPECT_EQ(Normalize("a\uE000b"), "ab");
}

TEST(BertNormalizerTest, PadsChineseCharacters) {
  EXPECT_EQ(Normalize("\u4E2D\u6587"), " \u4E2D  \u6587 ");
  // Hiragana and Hangul are not "Chinese" for BERT.
  EXPECT_EQ(Normalize("\u3072\u3089"), "\u3072\u3089");
  BertNormalizerOptions off;
  off.handle_chinese_chars = false;
  EXPECT_EQ(Normalize("\u4E2D\u6587", off), "\u4E2D\u6587");
}

TEST(BertNormalizerTest, HangulDecomposesToJamo) {
  EXPECT_EQ(Normalize("\uD55C"), "\u1112\u1161\u11AB");
  EXPECT_EQ(Normalize("\uAC00"), "\u1100\u1161");
}

TEST(BertNormalizerTest, LowercaseIsPerCharacterAndFull) {
  // No final-sigma rule, as in Rust's char::to_lowercase.
  EXPECT_EQ(Normalize("\u0391\u03A3"), "\u03B1\u03C3");
  // U+0130 decomposes first (I + dot above), the dot is stripped.
  EXPECT_EQ(Normalize("\u0130"), "i");
  // Without accent stripping the full mapping shows: i + U+0307.
  BertNormalizerOptions keep;
  keep.strip_accents = false;
  EXPECT_EQ(Normalize("\u0130", keep), "i\u0307");
  EXPECT_EQ(Normalize("Caf\u00C9", keep), "caf\u00E9");
}

TEST(BertNormalizerTest, CanonicalReorderingKeepsSpacingMarksInClassOrder) {
  // U+1D16D (class 226) before U+1D165 (class 216): NFD swaps them; both are Mc, so both stay.
  EXPECT_EQ(Normalize("x\U0001D16D\U0001D165"), "x\U0001D165\U0001D16D");
}

TEST(BertNormalizerTest, FollowsHuggingFacesOlderUnicodeTables) {
  // U+0890 is Cf since Unicode 14, unknown to HF's tables: kept.
  EXPECT_EQ(Normalize("a\u0890b"), "a\u0890b");
  // U+0898 is Mn since Unicode 14: HF does not strip it.
  EXPECT_EQ(Normalize("a\u0898"), "a\u0898");
  // U+11938 decomposes since Unicode 13; HF's NFD leaves it.
  EXPECT_EQ(Normalize("\U00011938"), "\U00011938");
}

TEST(BertNormalizerTest, AllOptionsOffIsIdentity) {
  const BertNormalizerOptions off{false, false, false, false};
  EXPECT_EQ(Normalize("A\u00C9\x01\u4E2D\t", off), "A\u00C9\x01\u4E2D\t");
}

TEST(BertPreTokenizerTest, SplitsOnWhitespaceAndIsolatesPunctuation) {
  EXPECT_EQ(Words("hey friend!     how are you?!?"),
            (std::vector<std::string>{"hey", "friend", "!", "how", "are", "you", "?", "!", "?"}));
  EXPECT_EQ(Words("a$b^c\u00BFd\u2014e"),
            (std::vector<std::string>{"a", "$", "b", "^", "c", "\u00BF", "d", "\u2014", "e"}));
  EXPECT_EQ(Words(""), std::vector<std::string>{});
  EXPECT_EQ(Words("   "), std::vector<std::string>{});
  // U+2E43 is punctuation only since Unicode 10; HF does not split on it.
  EXPECT_EQ(Words("a\u2E43b"), std::vector<std::string>{"a\u2E43b"});
}

}  // namespace
}  // namespace tailcut
