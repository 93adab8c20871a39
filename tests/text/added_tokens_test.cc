#include "text/added_tokens.h"

#include <gtest/gtest.h>

#include <string>

namespace tailcut {
namespace {

// "text|<id>|text" rendering of a split.
std::string Render(const AddedTokenMatcher& m, std::string_view text) {
  std::string out;
  m.Split(
      text,
      [&](std::string_view run) {
        out += "(" + std::string(run) + ")";
        return true;
      },
      [&](int64_t id) {
        out += "<" + std::to_string(id) + ">";
        return true;
      });
  return out;
}

TEST(AddedTokenMatcherTest, ExactCaseSensitiveMatches) {
  const AddedTokenMatcher m({{"[CLS]", 101}, {"[SEP]", 102}, {"[MASK]", 103}});
  EXPECT_EQ(Render(m, "[CLS] hi [SEP]"), "<101>( hi )<102>");
  EXPECT_EQ(Render(m, "x[MASK]y"), "(x)<103>(y)");
  EXPECT_EQ(Render(m, "[sep] [SEP"), "([sep] [SEP)");
  EXPECT_EQ(Render(m, "[SEP][SEP]"), "<102><102>");
  EXPECT_EQ(Render(m, ""), "");
  EXPECT_EQ(Render(m, "[[SEP]]"), "([)<102>(])");
}

TEST(AddedTokenMatcherTest, LeftmostThenLongest) {
  const AddedTokenMatcher m({{"ab", 1}, {"abc", 2}, {"bcd", 3}, {"", 9}});
  EXPECT_EQ(Render(m, "abcd"), "<2>(d)");
  EXPECT_EQ(Render(m, "xbcd"), "(x)<3>");
  EXPECT_EQ(Render(m, "abd"), "<1>(d)");
}

TEST(AddedTokenMatcherTest, CallbacksCanStop) {
  const AddedTokenMatcher m({{"|", 1}});
  int calls = 0;
  m.Split(
      "a|b|c", [&](std::string_view) { return ++calls < 2; }, [&](int64_t) { return true; });
  EXPECT_EQ(calls, 2);
}

}  // namespace
}  // namespace tailcut
