// Tests for src/config/settings.h: the builders the settings table is written with (the range
// taken from the field's type and unit, the narrowing modifiers, settings written to several
// fields) and the lookups over the table.
#include "config/settings.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <set>
#include <string>

#include "config/setting_names.h"

namespace tailcut::config_internal {
namespace {

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

TEST(SettingTest, KindAndRangeComeFromTheFieldsType) {
  const Setting i64 = Field(
      "t.a", "d", [](auto& c) -> auto& { return c.shutdown_grace_millis; });
  EXPECT_EQ(i64.kind, Kind::kInt);
  EXPECT_EQ(i64.min, kMin);
  EXPECT_EQ(i64.max, kMax);
  EXPECT_FALSE(i64.explicit_min);
  EXPECT_FALSE(i64.explicit_max);

  const Setting u16 = Field(
      "t.b", "d", [](auto& c) -> auto& { return c.http.port; });
  EXPECT_EQ(u16.min, 0);
  EXPECT_EQ(u16.max, 65535);

  const Setting i32 = Field(
      "t.c", "d", [](auto& c) -> auto& { return c.http.io_threads; });
  EXPECT_EQ(i32.min, std::numeric_limits<int>::min());
  EXPECT_EQ(i32.max, std::numeric_limits<int>::max());

  // size_t holds more than int64_t: the bound is int64_t's.
  const Setting size = Field(
      "t.d", "d", [](auto& c) -> auto& { return c.http.max_body_bytes; });
  EXPECT_EQ(size.min, 0);
  EXPECT_EQ(size.max, kMax);

  EXPECT_EQ(Field(
                "t.e", "d", [](auto& c) -> auto& { return c.log_level; })
                .kind,
            Kind::kString);
  EXPECT_EQ(Field(
                "t.f", "d", [](auto& c) -> auto& { return c.service.lazy_loading; })
                .kind,
            Kind::kBool);
}

TEST(SettingTest, ScaledSettingsConvertUnitsBothWays) {
  // Milliseconds in the key, microseconds in the field.
  const Setting s = Bind(
      "t.millis", "d", 1000, [](auto& c) -> auto& { return c.service.l1.ttl_micros; });
  EXPECT_EQ(s.max, kMax / 1000);  // What still fits once multiplied.
  ServerConfig c;
  s.set(c, Value(int64_t{7}));
  EXPECT_EQ(c.service.l1.ttl_micros, 7000);
  EXPECT_EQ(s.get(c), Value(int64_t{7}));
  c.service.l1.ttl_micros = 2999;  // Read back truncated to the key's unit.
  EXPECT_EQ(s.get(c), Value(int64_t{2}));
}

TEST(SettingTest, ModifiersNarrowAndMarkTheBounds) {
  const Setting s = Field(
                        "t.a", "d", [](auto& c) -> auto& { return c.http.port; })
                        .AtLeast(-5)  // Below the type's 0: narrowing never widens.
                        .AtMost(100)
                        .Alias("--a")
                        .NonEmpty()
                        .OneOf({"1", "2"});
  EXPECT_EQ(s.min, 0);
  EXPECT_EQ(s.max, 100);
  EXPECT_TRUE(s.explicit_min);
  EXPECT_TRUE(s.explicit_max);
  EXPECT_EQ(s.alias, "--a");
  EXPECT_TRUE(s.non_empty);
  EXPECT_EQ(s.choices, (std::vector<std::string>{"1", "2"}));
  EXPECT_EQ(s.key, "t.a");
  EXPECT_EQ(s.description, "d");
}

TEST(SettingTest, OneSettingWritesEveryField) {
  const Setting s = Field(
      "t.a", "d", [](auto& c) -> auto& { return c.service.text.scheduler.num_workers; },
      [](auto& c) -> auto& { return c.service.tensor.scheduler.num_workers; });
  ServerConfig c;
  EXPECT_TRUE(s.consistent(c));
  s.set(c, Value(int64_t{3}));
  EXPECT_EQ(c.service.text.scheduler.num_workers, 3);
  EXPECT_EQ(c.service.tensor.scheduler.num_workers, 3);
  EXPECT_TRUE(s.consistent(c));
  c.service.tensor.scheduler.num_workers = 4;
  EXPECT_FALSE(s.consistent(c));
  EXPECT_EQ(s.get(c), Value(int64_t{3}));  // The first field is the one read back.
}

TEST(SettingsTableTest, FindSetting) {
  const Setting* port = FindSetting("server.port");
  ASSERT_NE(port, nullptr);
  EXPECT_EQ(port->key, "server.port");
  EXPECT_EQ(port->alias, "--port");
  EXPECT_EQ(FindSetting("server"), nullptr);
  EXPECT_EQ(FindSetting("server.por"), nullptr);
  EXPECT_EQ(FindSetting("SERVER.PORT"), nullptr);  // Keys are exact.
}

TEST(SettingsTableTest, IsSection) {
  EXPECT_TRUE(IsSection("server"));
  EXPECT_TRUE(IsSection("log"));
  EXPECT_FALSE(IsSection("serve"));  // A prefix, but not at a dot.
  EXPECT_FALSE(IsSection("server.port"));
  EXPECT_FALSE(IsSection(""));
}

TEST(SettingsTableTest, EverySettingIsInAListedSectionAndEverySectionHasSettings) {
  // A setting outside Sections() would be missing from the reference, and unknown variables
  // of its section would go unreported.
  std::set<std::string> sections;
  for (const auto& [section, intro] : Sections()) {
    EXPECT_TRUE(sections.insert(section).second) << section << " is listed twice";
    EXPECT_FALSE(intro.empty()) << section;
    EXPECT_TRUE(IsSection(section)) << section << " has no settings";
  }
  for (const auto& s : Settings()) {
    EXPECT_EQ(sections.count(std::string(SectionOf(s.key))), 1u) << s.key;
    EXPECT_FALSE(s.description.empty()) << s.key;
    EXPECT_TRUE(s.alias.empty() || s.alias.starts_with("--")) << s.key;
  }
}

}  // namespace
}  // namespace tailcut::config_internal
