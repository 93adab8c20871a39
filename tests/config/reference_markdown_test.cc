// Tests for ConfigReferenceMarkdown() (src/config/reference_markdown.cc): every setting has
// its row with the right cells, and docs/configuration.md is its current output.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "config/server_config.h"
#include "tests/config/config_test_util.h"

namespace tailcut {
namespace {

namespace fs = std::filesystem;
using config_test::Contains;
using config_test::ReadFile;

TEST(ConfigReferenceTest, ListsEverySetting) {
  const std::string md = ConfigReferenceMarkdown();
  const ServerConfig d;
  for (const auto& key : ConfigKeys()) {
    EXPECT_TRUE(Contains(md, "| `" + key + "` |")) << key;
  }
  EXPECT_TRUE(Contains(md, "`TAILCUT_SERVER_PORT`"));
  EXPECT_TRUE(Contains(md, "`--server.port`, `--port`"));
  EXPECT_TRUE(Contains(md, "| `" + std::to_string(d.http.port) + "` |"));
  EXPECT_FALSE(Contains(md, "| `` |"));  // Empty defaults are shown as "".
}

TEST(ConfigReferenceTest, TypeColumnSaysWhatIsAccepted) {
  const std::string md = ConfigReferenceMarkdown();
  // Both bounds the setting's own; only a lower one; the type's range (not shown); choices
  // of an integer and of a string; strings that may and may not be empty; booleans.
  EXPECT_TRUE(Contains(md, "`--port` | integer 0..65535 | `8080` |"));
  EXPECT_TRUE(Contains(md, "`--server.max_connections` | integer >= 1 |"));
  EXPECT_TRUE(Contains(md, "`--engine.graph_optimization_level` | one of 0, 1, 2, 99 | `99` |"));
  EXPECT_TRUE(Contains(md, "`--log.level` | one of `trace`, `debug`, `info`, `warn`, `error` |"));
  EXPECT_TRUE(Contains(md, "`--redis.host` | non-empty string |"));
  EXPECT_TRUE(Contains(md, "`--auth.api_keys` | string | `\"\"` |"));
  EXPECT_TRUE(Contains(md, "`--models.lazy_loading` | boolean |"));
  // One section heading and table per section, in order.
  const size_t server = md.find("\n## server\n");
  const size_t log = md.find("\n## log\n");
  ASSERT_NE(server, std::string::npos);
  ASSERT_NE(log, std::string::npos);
  EXPECT_LT(server, log);
}

TEST(ConfigReferenceTest, DocIsUpToDate) {
  const fs::path committed = fs::path(TAILCUT_SOURCE_DIR) / "docs" / "configuration.md";
  const std::string want = ConfigReferenceMarkdown();
  const std::string have = ReadFile(committed);
  if (have != want) {
    const fs::path fresh = fs::path(TAILCUT_CONFIG_TEST_OUT_DIR) / "configuration.md";
    std::ofstream(fresh, std::ios::binary) << want;
    FAIL() << committed << " does not match ConfigReferenceMarkdown(). The settings table in "
           << "src/config/server_config.cc changed; regenerate the file with:\n  cp " << fresh
           << " " << committed;
  }
}

}  // namespace
}  // namespace tailcut
