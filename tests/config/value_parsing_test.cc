// Tests for src/config/value_parsing.h: what each kind of setting accepts, the phrase a bad
// value gets (the tail of every source's error message), and values shown as text.
#include "config/value_parsing.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>

namespace tailcut::config_internal {
namespace {

// Parses `text` for `s`; returns the value as text, or "error: <phrase>".
std::string Parse(const Setting& s, std::string_view text) {
  std::string problem;
  const std::optional<Value> v = ParseValue(s, text, &problem);
  if (!v) return "error: " + problem;
  EXPECT_EQ(problem, "");
  return FormatValue(*v);
}

Setting Port() {
  return Field(
             "t.port", "d", [](auto& c) -> auto& { return c.http.port; })
      .AtLeast(1);
}
Setting Int64() {
  return Field(
      "t.i", "d", [](auto& c) -> auto& { return c.shutdown_grace_millis; });
}
Setting Bool() {
  return Field(
      "t.b", "d", [](auto& c) -> auto& { return c.service.lazy_loading; });
}
Setting Text() {
  return Field(
      "t.s", "d", [](auto& c) -> auto& { return c.log_level; });
}

TEST(ValueParsingTest, Booleans) {
  for (const char* yes : {"true", "1", "yes", "TRUE", "Yes"}) EXPECT_EQ(Parse(Bool(), yes), "true");
  for (const char* no : {"false", "0", "no", "False", "NO"}) EXPECT_EQ(Parse(Bool(), no), "false");
  for (const char* bad : {"", "maybe", "on", " true", "2"}) {
    EXPECT_EQ(Parse(Bool(), bad), "error: is not a boolean (true/false, 1/0, yes/no)") << bad;
  }
}

TEST(ValueParsingTest, Integers) {
  EXPECT_EQ(Parse(Port(), "8080"), "8080");
  EXPECT_EQ(Parse(Port(), "1"), "1");
  EXPECT_EQ(Parse(Port(), "65535"), "65535");
  EXPECT_EQ(Parse(Int64(), "-42"), "-42");
  for (const char* bad : {"", "abc", " 1", "1 ", "1.5", "+1", "0x10", "1e3", "--1"}) {
    EXPECT_EQ(Parse(Port(), bad), "error: is not an integer") << bad;
  }
}

TEST(ValueParsingTest, IntegerRange) {
  EXPECT_EQ(Parse(Port(), "0"), "error: is too small: must be at least 1");
  EXPECT_EQ(Parse(Port(), "-1"), "error: is too small: must be at least 1");
  EXPECT_EQ(Parse(Port(), "65536"), "error: is too large: must be at most 65535");
  // Past int64_t itself: still "too large/small", with the setting's own bound.
  EXPECT_EQ(Parse(Port(), "99999999999999999999"), "error: is too large: must be at most 65535");
  EXPECT_EQ(Parse(Port(), "-99999999999999999999"), "error: is too small: must be at least 1");
  EXPECT_EQ(Parse(Int64(), "9223372036854775807"), "9223372036854775807");
  EXPECT_EQ(Parse(Int64(), "9223372036854775808"),
            "error: is too large: must be at most 9223372036854775807");
  EXPECT_EQ(Parse(Int64(), "-9223372036854775809"),
            "error: is too small: must be at least -9223372036854775808");
}

TEST(ValueParsingTest, IntegerChoices) {
  const Setting s = Field(
                        "t.level", "d",
                        [](auto& c) -> auto& { return c.service.session.graph_optimization_level; })
                        .OneOf({"0", "1", "2", "99"});
  EXPECT_EQ(Parse(s, "99"), "99");
  EXPECT_EQ(Parse(s, "3"), "error: is not one of 0, 1, 2, 99");
  EXPECT_EQ(Parse(s, "x"), "error: is not an integer");  // Not an integer comes first.
}

TEST(ValueParsingTest, Strings) {
  EXPECT_EQ(Parse(Text(), ""), "");
  EXPECT_EQ(Parse(Text(), " kept as given "), " kept as given ");
  const Setting non_empty = Text().NonEmpty();
  EXPECT_EQ(Parse(non_empty, ""), "error: must not be empty");
  EXPECT_EQ(Parse(non_empty, " "), " ");
}

TEST(ValueParsingTest, StringChoicesMatchAnyCaseAndStoreAsListed) {
  const Setting s = Text().OneOf({"info", "warn"});
  EXPECT_EQ(Parse(s, "warn"), "warn");
  EXPECT_EQ(Parse(s, "WARN"), "warn");
  EXPECT_EQ(Parse(s, "Info"), "info");
  EXPECT_EQ(Parse(s, "verbose"), "error: is not one of info, warn");
  EXPECT_EQ(Parse(s, ""), "error: is not one of info, warn");
}

TEST(ValueParsingTest, ShowValueQuotesWhatWouldBeInvisible) {
  EXPECT_EQ(ShowValue("abc"), "abc");
  EXPECT_EQ(ShowValue("a b"), "a b");
  EXPECT_EQ(ShowValue(""), "\"\"");
  EXPECT_EQ(ShowValue(" 80"), "\" 80\"");
  EXPECT_EQ(ShowValue("80\t"), "\"80\t\"");
}

TEST(ValueParsingTest, FormatValue) {
  EXPECT_EQ(FormatValue(Value(int64_t{-5})), "-5");
  EXPECT_EQ(FormatValue(Value(true)), "true");
  EXPECT_EQ(FormatValue(Value(false)), "false");
  EXPECT_EQ(FormatValue(Value(std::string("models"))), "models");
  EXPECT_EQ(FormatValue(Value(std::string())), "");
}

TEST(ValueParsingTest, KindNameLowerAndJoinChoices) {
  EXPECT_EQ(KindName(Bool()), "a boolean");
  EXPECT_EQ(KindName(Port()), "an integer");
  EXPECT_EQ(KindName(Text()), "a string");
  EXPECT_EQ(Lower("TAILCUT_Server.Port-1"), "tailcut_server.port-1");
  EXPECT_EQ(JoinChoices({"a", "b", "c"}), "a, b, c");
  EXPECT_EQ(JoinChoices({"a"}), "a");
  EXPECT_EQ(JoinChoices({}), "");
}

}  // namespace
}  // namespace tailcut::config_internal
