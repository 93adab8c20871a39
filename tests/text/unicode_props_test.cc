#include "text/unicode_props.h"

#include <gtest/gtest.h>

#include "text/unicode_overrides.h"

namespace tailcut {
namespace {

using B = CodePointInfo::Bit;

TEST(UnicodePropsTest, OverridesWereGeneratedForTheLinkedUtf8proc) {
  // If this fails, utf8proc was upgraded: rerun tools/gen_unicode_overrides.py and
  // tools/tokenizer_unicode_audit.py so the tables again describe HF exactly.
  EXPECT_EQ(UnicodeProps::Utf8procUnicodeVersion(), unicode_overrides::kUtf8procUnicodeVersion);
}

TEST(UnicodePropsTest, BaseClasses) {
  const UnicodeProps& p = UnicodeProps::Get();
  EXPECT_TRUE(p.Lookup(U'\x01').Has(B::kControl));
  EXPECT_FALSE(p.Lookup(U'\t').Has(B::kControl));
  EXPECT_TRUE(p.Lookup(U'\t').Has(B::kBertWhitespace));
  EXPECT_TRUE(p.Lookup(U'\u200B').Has(B::kControl));  // Cf.
  EXPECT_TRUE(p.Lookup(U'\u3000').Has(B::kWhiteSpace));
  EXPECT_TRUE(p.Lookup(U'$').Has(B::kPunctuation));  // ASCII, though Sc.
  EXPECT_TRUE(p.Lookup(U'\u00BF').Has(B::kPunctuation));
  EXPECT_FALSE(p.Lookup(U'\u20AC').Has(B::kPunctuation));
  EXPECT_TRUE(p.Lookup(U'\u4E00').Has(B::kChinese));
  EXPECT_FALSE(p.Lookup(U'\U0002B820').Has(B::kChinese));  // A gap in BERT's ranges.
  EXPECT_TRUE(p.Lookup(U'\u0301').Has(B::kNonspacingMark));
  EXPECT_EQ(p.Lookup(U'\u0301').combining_class(), 230);
  EXPECT_TRUE(p.Lookup(U'\u00E9').Has(B::kDecomposes));
  EXPECT_TRUE(p.Lookup(U'A').Has(B::kLowercases));
  EXPECT_EQ(p.Lowercase(p.Lookup(U'A')), U"a");
  EXPECT_FALSE(p.Lookup(U'a').Has(B::kLowercases));
}

TEST(UnicodePropsTest, DecompositionsAreFullAndHangulIsAlgorithmic) {
  const UnicodeProps& p = UnicodeProps::Get();
  std::vector<char32_t> out;
  p.AppendDecomposition(U'\u1EC7', p.Lookup(U'\u1EC7'), out);  // ệ -> e + dot below + circumflex.
  EXPECT_EQ(out, (std::vector<char32_t>{U'e', U'\u0323', U'\u0302'}));
  out.clear();
  p.AppendDecomposition(U'\uD7A3', p.Lookup(U'\uD7A3'), out);
  EXPECT_EQ(out, (std::vector<char32_t>{U'\u1112', U'\u1175', U'\u11C2'}));
}

TEST(UnicodePropsTest, HuggingFaceOverridesApply) {
  const UnicodeProps& p = UnicodeProps::Get();
  EXPECT_EQ(p.Lowercase(p.Lookup(U'\u0130')), U"i\u0307");    // Full mapping.
  EXPECT_FALSE(p.Lookup(U'\U00011938').Has(B::kDecomposes));  // Newer than HF's NFD.
  EXPECT_FALSE(p.Lookup(U'\u0890').Has(B::kControl));         // Newer Cf.
  EXPECT_FALSE(p.Lookup(U'\u0898').Has(B::kNonspacingMark));  // Newer Mn.
  EXPECT_EQ(p.Lookup(U'\u0898').combining_class(), 0);
  EXPECT_FALSE(p.Lookup(U'\u2E43').Has(B::kPunctuation));  // Newer Po.
  EXPECT_TRUE(p.Lookup(U'\u166D').Has(B::kPunctuation));   // Po in HF's old tables.
  EXPECT_TRUE(p.Lookup(U'\uA7CB').Has(B::kLowercases));    // Newer than utf8proc.
}

}  // namespace
}  // namespace tailcut
