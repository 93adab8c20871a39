// Tests for src/config/yaml_source.h on its own (the loader's tests in server_config_test.cc
// cover its messages through ServerConfigLoader): what it applies, and that one bad entry
// does not stop the others.
#include "config/yaml_source.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/config/config_test_util.h"

namespace tailcut::config_internal {
namespace {

using config_test::WriteFile;

TEST(YamlSourceTest, AppliesEveryGoodSettingAndReportsEveryBadOne) {
  const std::string path = WriteFile("yaml_source_mixed.yaml", R"(server:
  port: 9001
  prot: 1
batching:
  max_batch_size: 0
  batch_timeout_micros: 250
models:
  lazy_loading: yes
)");
  ServerConfig config;
  std::vector<std::string> errors;
  ApplyConfigFile(path, &config, &errors);
  EXPECT_EQ(config.http.port, 9001);
  EXPECT_EQ(config.service.text.scheduler.queue.batch_timeout_micros, 250);
  EXPECT_EQ(config.service.tensor.scheduler.queue.batch_timeout_micros, 250);
  EXPECT_TRUE(config.service.lazy_loading);
  EXPECT_EQ(config.service.text.scheduler.queue.max_batch_size,
            ServerConfig().service.text.scheduler.queue.max_batch_size);
  EXPECT_EQ(errors, (std::vector<std::string>{
                        path + ":3:3: unknown key server.prot (did you mean server.port?)",
                        path + ":5:19: batching.max_batch_size=0 is too small: must be at least 1",
                    }));
}

TEST(YamlSourceTest, CommentsOnlySetNothing) {
  const std::string path = WriteFile("yaml_source_comments.yaml", "# server:\n#   port: 1\n");
  ServerConfig config;
  std::vector<std::string> errors;
  ApplyConfigFile(path, &config, &errors);
  EXPECT_TRUE(errors.empty());
  EXPECT_EQ(config.http.port, ServerConfig().http.port);
}

TEST(YamlSourceTest, UnreadableFile) {
  ServerConfig config;
  std::vector<std::string> errors;
  ApplyConfigFile("/nonexistent/x.yaml", &config, &errors);
  EXPECT_EQ(errors, (std::vector<std::string>{
                        "cannot read config file /nonexistent/x.yaml: No such file or directory"}));
}

}  // namespace
}  // namespace tailcut::config_internal
