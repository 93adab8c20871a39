// Tests for src/config/environment_source.h on its own (the loader's tests in
// server_config_test.cc cover precedence): what it applies, which TAILCUT_* variables it
// claims, and reading the process environment.
#include "config/environment_source.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <map>
#include <string>
#include <vector>

namespace tailcut::config_internal {
namespace {

TEST(EnvironmentSourceTest, AppliesEveryGoodSettingAndReportsEveryBadOne) {
  const std::map<std::string, std::string> env = {
      {"TAILCUT_SERVER_PORT", "9002"},
      {"TAILCUT_SERVER_HOST", ""},
      {"TAILCUT_BATCHING_MAX_BATCH_SIZE", "12"},
      {"TAILCUT_REQUESTS_DEFAULT_TIMEOUT_MILLIS", "3"},
      {"TAILCUT_SERVER_PROT", "1"},
      {"TAILCUT_CONFIG", "/not/ours.yaml"},
      {"TAILCUT_MODEL_DIR", "/not/ours"},
      {"HOME", "/root"},
  };
  ServerConfig config;
  std::vector<std::string> errors;
  ApplyEnvironment(env, &config, &errors);
  EXPECT_EQ(config.http.port, 9002);
  EXPECT_EQ(config.http.host, ServerConfig().http.host);
  EXPECT_EQ(config.service.text.scheduler.queue.max_batch_size, 12);
  EXPECT_EQ(config.service.tensor.scheduler.queue.max_batch_size, 12);
  EXPECT_EQ(config.service.text.default_timeout_micros, 3000);
  // Settings first (table order), then unknown variables (name order).
  EXPECT_EQ(errors, (std::vector<std::string>{
                        "TAILCUT_SERVER_HOST=\"\" must not be empty",
                        "unknown environment variable TAILCUT_SERVER_PROT (did you mean "
                        "TAILCUT_SERVER_PORT?)",
                    }));
}

TEST(EnvironmentSourceTest, ProcessEnvironmentReadsThisProcesss) {
  ASSERT_EQ(setenv("TAILCUT_ENVIRONMENT_SOURCE_TEST", "a=b", 1), 0);
  const std::map<std::string, std::string> env = ProcessEnvironment();
  unsetenv("TAILCUT_ENVIRONMENT_SOURCE_TEST");
  const auto it = env.find("TAILCUT_ENVIRONMENT_SOURCE_TEST");
  ASSERT_NE(it, env.end());
  EXPECT_EQ(it->second, "a=b");  // Split at the first '='.
}

}  // namespace
}  // namespace tailcut::config_internal
