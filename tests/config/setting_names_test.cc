// Tests for src/config/setting_names.h: the variable, flag and section derived from a key.
#include "config/setting_names.h"

#include <gtest/gtest.h>

namespace tailcut::config_internal {
namespace {

TEST(SettingNamesTest, EnvName) {
  EXPECT_EQ(EnvName("server.port"), "TAILCUT_SERVER_PORT");
  EXPECT_EQ(EnvName("cache.l1_ttl_seconds"), "TAILCUT_CACHE_L1_TTL_SECONDS");
  EXPECT_EQ(EnvName("a.b.c"), "TAILCUT_A_B_C");
  EXPECT_EQ(EnvName("server"), "TAILCUT_SERVER");
  EXPECT_TRUE(EnvName("x").starts_with(kEnvPrefix));
}

TEST(SettingNamesTest, FlagName) {
  EXPECT_EQ(FlagName("server.port"), "--server.port");
  EXPECT_EQ(FlagName("models.lazy_loading"), "--models.lazy_loading");
}

TEST(SettingNamesTest, SectionOf) {
  EXPECT_EQ(SectionOf("server.port"), "server");
  EXPECT_EQ(SectionOf("a.b.c"), "a");
  EXPECT_EQ(SectionOf("log"), "log");
}

TEST(SettingNamesTest, AfterFirst) {
  EXPECT_EQ(AfterFirst("server.port", '.'), "port");
  EXPECT_EQ(AfterFirst("a.b.c", '.'), "b.c");
  EXPECT_EQ(AfterFirst("server", '.'), "server");
  EXPECT_EQ(AfterFirst("server.", '.'), "");
  EXPECT_EQ(AfterFirst("SERVER_MAX_BATCH", '_'), "MAX_BATCH");
}

}  // namespace
}  // namespace tailcut::config_internal
