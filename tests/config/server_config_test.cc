// Tests for the serve configuration: defaults, the three sources and their precedence, the
// errors each source produces (reference_markdown_test.cc checks docs/configuration.md).
#include "config/server_config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "tests/config/config_test_util.h"

namespace tailcut {
namespace {

namespace fs = std::filesystem;
using config_test::Contains;
using config_test::WriteFile;
using Env = std::map<std::string, std::string>;

// A `serve` subcommand with the loader's flags, parsed from `args`, then loaded with `env` as
// the whole environment (so the test process's own environment never leaks in).
class Harness {
 public:
  Harness() : serve_(app_.add_subcommand("serve")), loader_(*serve_) {}

  Result<ServerConfig> Load(const std::vector<std::string>& args, const Env& env = {}) {
    std::vector<std::string> words = {"tailcut", "serve"};
    words.insert(words.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& w : words) argv.push_back(w.data());
    app_.parse(static_cast<int>(argv.size()), argv.data());
    return loader_.Load(&env);
  }

  const ServerConfigLoader& loader() const { return loader_; }

 private:
  CLI::App app_{"test"};
  CLI::App* serve_;
  ServerConfigLoader loader_;
};

Result<ServerConfig> Load(const std::vector<std::string>& args, const Env& env = {}) {
  Harness h;
  return h.Load(args, env);
}

std::string ErrorOf(const Result<ServerConfig>& r) {
  EXPECT_FALSE(r.ok()) << "expected an error";
  return r.ok() ? "" : r.status().message();
}

// ---------------------------------------------------------------------------------------------
// Defaults

TEST(ServerConfigTest, DefaultsUntouchedWhenNothingSet) {
  auto r = Load({});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const ServerConfig& c = *r;
  const ServerConfig d;
  // Compared field by field against the structs themselves, not through the settings table,
  // so a table entry that writes a default would be caught.
  EXPECT_EQ(c.http.host, d.http.host);
  EXPECT_EQ(c.http.port, d.http.port);
  EXPECT_EQ(c.http.io_threads, d.http.io_threads);
  EXPECT_EQ(c.http.max_body_bytes, d.http.max_body_bytes);
  EXPECT_EQ(c.http.max_header_bytes, d.http.max_header_bytes);
  EXPECT_EQ(c.http.header_timeout_millis, d.http.header_timeout_millis);
  EXPECT_EQ(c.http.body_timeout_millis, d.http.body_timeout_millis);
  EXPECT_EQ(c.http.idle_timeout_millis, d.http.idle_timeout_millis);
  EXPECT_EQ(c.http.write_timeout_millis, d.http.write_timeout_millis);
  EXPECT_EQ(c.http.max_connections, d.http.max_connections);
  EXPECT_EQ(c.service.model_repository, d.service.model_repository);
  EXPECT_EQ(c.service.default_model, d.service.default_model);
  EXPECT_EQ(c.service.lazy_loading, d.service.lazy_loading);
  EXPECT_EQ(c.service.session.graph_optimization_level, d.service.session.graph_optimization_level);
  EXPECT_EQ(c.service.session.optimized_model_path, d.service.session.optimized_model_path);
  EXPECT_EQ(c.service.session.enable_memory_pattern, d.service.session.enable_memory_pattern);
  EXPECT_EQ(c.service.session.enable_cpu_arena, d.service.session.enable_cpu_arena);
  const std::pair<const BatchSchedulerOptions*, const BatchSchedulerOptions*> schedulers[] = {
      {&c.service.text.scheduler, &d.service.text.scheduler},
      {&c.service.tensor.scheduler, &d.service.tensor.scheduler}};
  for (const auto& [have, want] : schedulers) {
    EXPECT_EQ(have->queue.max_batch_size, want->queue.max_batch_size);
    EXPECT_EQ(have->queue.max_batch_tokens, want->queue.max_batch_tokens);
    EXPECT_EQ(have->queue.batch_timeout_micros, want->queue.batch_timeout_micros);
    EXPECT_EQ(have->queue.max_enqueued_rows, want->queue.max_enqueued_rows);
    EXPECT_EQ(have->queue.grouping_window, want->queue.grouping_window);
    EXPECT_EQ(have->num_workers, want->num_workers);
    EXPECT_EQ(have->initial_batch_estimate_micros, want->initial_batch_estimate_micros);
  }
  EXPECT_EQ(c.service.text.default_timeout_micros, d.service.text.default_timeout_micros);
  EXPECT_EQ(c.service.text.max_inputs_per_request, d.service.text.max_inputs_per_request);
  EXPECT_EQ(c.service.tensor.default_timeout_micros, d.service.tensor.default_timeout_micros);
  EXPECT_EQ(c.engine.intra_op_threads, d.engine.intra_op_threads);
  EXPECT_EQ(c.engine.inter_op_threads, d.engine.inter_op_threads);
  EXPECT_EQ(c.engine.allow_spinning, d.engine.allow_spinning);
  EXPECT_EQ(c.engine.log_severity, d.engine.log_severity);
  EXPECT_EQ(c.log_level, d.log_level);
  EXPECT_EQ(c.shutdown_grace_millis, d.shutdown_grace_millis);
  EXPECT_EQ(c.slow_request_log_millis, d.slow_request_log_millis);
}

TEST(ServerConfigTest, SharedSettingsHaveOneDefault) {
  // batching.* and requests.default_timeout_millis write both servables; the reference can
  // only show one default if the structs agree.
  EXPECT_EQ(config_internal::FirstInconsistentDefault(), "");
}

TEST(ServerConfigTest, FormatConfigValueReadsTheStructs) {
  const ServerConfig d;
  EXPECT_EQ(FormatConfigValue(d, "server.port"), std::to_string(d.http.port));
  EXPECT_EQ(FormatConfigValue(d, "server.host"), d.http.host);
  EXPECT_EQ(FormatConfigValue(d, "models.lazy_loading"), d.service.lazy_loading ? "true" : "false");
  EXPECT_EQ(FormatConfigValue(d, "requests.default_timeout_millis"),
            std::to_string(d.service.text.default_timeout_micros / 1000));
  EXPECT_EQ(FormatConfigValue(d, "no.such.key"), std::nullopt);
}

TEST(ServerConfigTest, KeysAreUniqueAndDotted) {
  const std::vector<std::string> keys = ConfigKeys();
  std::set<std::string> unique(keys.begin(), keys.end());
  EXPECT_EQ(unique.size(), keys.size());
  for (const auto& k : keys) {
    EXPECT_TRUE(std::regex_match(k, std::regex("[a-z]+\\.[a-z][a-z0-9_]*"))) << k;
  }
}

// ---------------------------------------------------------------------------------------------
// The file

TEST(ServerConfigTest, FileSetsNestedValues) {
  const std::string path = WriteFile("nested.yaml", R"(# A comment.
server:
  host: 0.0.0.0
  port: 9000
  max_body_bytes: 1048576
  shutdown_grace_millis: 2500
models:
  repository: /srv/models
  default: minilm
  lazy_loading: yes
engine:
  intra_op_threads: 4
  graph_optimization_level: 1
batching:
  max_batch_size: 16
  batch_timeout_micros: 500
requests:
  default_timeout_millis: 250
log:
  level: debug
  slow_request_millis: 0
)");
  auto r = Load({"--config", path});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->http.host, "0.0.0.0");
  EXPECT_EQ(r->http.port, 9000);
  EXPECT_EQ(r->http.max_body_bytes, 1048576u);
  EXPECT_EQ(r->shutdown_grace_millis, 2500);
  EXPECT_EQ(r->service.model_repository, "/srv/models");
  EXPECT_EQ(r->service.default_model, "minilm");
  EXPECT_TRUE(r->service.lazy_loading);
  EXPECT_EQ(r->engine.intra_op_threads, 4);
  EXPECT_EQ(r->service.session.graph_optimization_level, 1);
  // Batching reaches both kinds of servable.
  EXPECT_EQ(r->service.text.scheduler.queue.max_batch_size, 16);
  EXPECT_EQ(r->service.tensor.scheduler.queue.max_batch_size, 16);
  EXPECT_EQ(r->service.text.scheduler.queue.batch_timeout_micros, 500);
  EXPECT_EQ(r->service.tensor.scheduler.queue.batch_timeout_micros, 500);
  // Milliseconds in the file, microseconds in the structs.
  EXPECT_EQ(r->service.text.default_timeout_micros, 250'000);
  EXPECT_EQ(r->service.tensor.default_timeout_micros, 250'000);
  EXPECT_EQ(r->log_level, "debug");
  EXPECT_EQ(r->slow_request_log_millis, 0);
  // Untouched settings keep the struct defaults.
  EXPECT_EQ(r->http.io_threads, HttpServerOptions{}.io_threads);
  EXPECT_EQ(r->service.text.scheduler.queue.max_enqueued_rows,
            BatchQueueOptions{}.max_enqueued_rows);
}

TEST(ServerConfigTest, EmptyFileAndEmptySectionsSetNothing) {
  const std::string empty = WriteFile("empty.yaml", "# nothing yet\n");
  auto r = Load({"--config", empty});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->http.port, HttpServerOptions{}.port);

  const std::string sections = WriteFile("sections.yaml", "server:\n  # port: 1\nmodels:\n");
  r = Load({"--config", sections});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->http.port, HttpServerOptions{}.port);
}

TEST(ServerConfigTest, UnknownKeyIsAnErrorNamingIt) {
  const std::string path = WriteFile("typo.yaml", "server:\n  prot: 9000\n");
  EXPECT_EQ(ErrorOf(Load({"--config", path})),
            path + ":2:3: unknown key server.prot (did you mean server.port?)");
}

TEST(ServerConfigTest, UnknownKeysAreSuggestedAcrossSections) {
  const std::string path =
      WriteFile("sections_typo.yaml", "sever:\n  port: 1\nserver:\n  max_batch_size: 4\n");
  const std::string error = ErrorOf(Load({"--config", path}));
  EXPECT_TRUE(Contains(error, ":1:1: unknown key sever (did you mean server?)"));
  EXPECT_TRUE(Contains(error,
                       ":4:3: unknown key server.max_batch_size (did you mean "
                       "batching.max_batch_size?)"));
}

TEST(ServerConfigTest, UnknownKeyFarFromAnyHasNoSuggestion) {
  const std::string path = WriteFile("far.yaml", "telemetry:\n  endpoint: x\n");
  EXPECT_EQ(ErrorOf(Load({"--config", path})), path + ":1:1: unknown key telemetry");
}

TEST(ServerConfigTest, DottedKeysAtTheTopLevelAreNotAccepted) {
  // One spelling in files: nested maps. A flat "server.port" key is unknown.
  const std::string path = WriteFile("flat.yaml", "server.port: 9000\nlog:\n  a.b.c: 1\n");
  const std::string error = ErrorOf(Load({"--config", path}));
  EXPECT_TRUE(Contains(error, path + ":1:1: unknown key server.port (keys are not dotted in "
                                     "files: write it server: {port: ...})"));
  EXPECT_TRUE(Contains(error,
                       "unknown key log.a.b.c (keys are not dotted in files: write it "
                       "log: {a: {b: {c: ...}}})"));
}

TEST(ServerConfigTest, WrongYamlTypes) {
  const std::string path = WriteFile("types.yaml", R"(server:
  port: [1, 2]
  host: {a: 1}
  io_threads: abc
models: 5
engine:
  allow_spinning: maybe
  intra_op_threads:
)");
  const std::string error = ErrorOf(Load({"--config", path}));
  EXPECT_TRUE(Contains(error, path + ":2:9: server.port must be an integer, not a list"));
  EXPECT_TRUE(Contains(error, path + ":3:9: server.host must be a string, not a map"));
  EXPECT_TRUE(Contains(error, path + ":4:15: server.io_threads=abc is not an integer"));
  EXPECT_TRUE(Contains(error, path + ":5:9: models must be a map of settings, not a scalar"));
  EXPECT_TRUE(
      Contains(error, "engine.allow_spinning=maybe is not a boolean (true/false, 1/0, yes/no)"));
  EXPECT_TRUE(Contains(error, "engine.intra_op_threads has no value"));
}

TEST(ServerConfigTest, TopLevelMustBeAMap) {
  const std::string path = WriteFile("list.yaml", "- server\n- port\n");
  EXPECT_TRUE(Contains(ErrorOf(Load({"--config", path})),
                       "the top level must be a map of sections, not a list"));
}

TEST(ServerConfigTest, RepeatedKeyIsAnError) {
  const std::string path = WriteFile("twice.yaml", "server:\n  port: 1\n  port: 2\n");
  EXPECT_EQ(ErrorOf(Load({"--config", path})), path + ":3:3: server.port is given twice");
}

TEST(ServerConfigTest, InvalidYamlNamesTheFileAndLine) {
  const std::string path = WriteFile("broken.yaml", "server:\n  port: [1\n");
  const std::string error = ErrorOf(Load({"--config", path}));
  EXPECT_TRUE(Contains(error, path + ":"));
  EXPECT_TRUE(Contains(error, "invalid YAML"));
}

TEST(ServerConfigTest, MissingFileNamesThePath) {
  EXPECT_EQ(ErrorOf(Load({"--config", "/nonexistent/tailcut.yaml"})),
            "cannot read config file /nonexistent/tailcut.yaml: No such file or directory");
}

TEST(ServerConfigTest, ConfigPathFromEnvironment) {
  const std::string from_env = WriteFile("env.yaml", "server:\n  port: 7001\n");
  const std::string from_flag = WriteFile("flag.yaml", "server:\n  port: 7002\n");
  Harness h;
  auto r = h.Load({}, {{"TAILCUT_CONFIG", from_env}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->http.port, 7001);
  EXPECT_EQ(h.loader().config_path(), from_env);

  // --config wins over $TAILCUT_CONFIG.
  r = Load({"--config", from_flag}, {{"TAILCUT_CONFIG", from_env}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->http.port, 7002);

  // --config "" reads no file at all.
  r = Load({"--config", ""}, {{"TAILCUT_CONFIG", from_env}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->http.port, HttpServerOptions{}.port);
}

TEST(ServerConfigTest, ExampleConfigLoads) {
  const std::string path = std::string(TAILCUT_SOURCE_DIR) + "/docs/example-config.yaml";
  ASSERT_TRUE(fs::exists(path)) << path;
  auto r = Load({"--config", path});
  EXPECT_TRUE(r.ok()) << r.status().ToString();
}

// ---------------------------------------------------------------------------------------------
// Precedence

TEST(ServerConfigTest, PrecedenceFileThenEnvironmentThenFlags) {
  const std::string path = WriteFile("precedence.yaml", R"(server:
  port: 1001
  host: file.example
  io_threads: 3
models:
  repository: /file/models
  lazy_loading: true
batching:
  max_batch_size: 8
  max_enqueued_rows: 100
requests:
  default_timeout_millis: 100
)");
  const Env env = {
      {"TAILCUT_SERVER_PORT", "1002"},
      {"TAILCUT_SERVER_HOST", "env.example"},
      {"TAILCUT_MODELS_LAZY_LOADING", "false"},
      {"TAILCUT_BATCHING_MAX_BATCH_SIZE", "12"},
      {"TAILCUT_REQUESTS_DEFAULT_TIMEOUT_MILLIS", "200"},
  };
  auto r = Load({"--config", path, "--port", "1003", "--server.host=flag.example",
                 "--max-batch-size", "24", "--models.lazy_loading"},
                env);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // All three set: the flag wins (alias and full spelling alike).
  EXPECT_EQ(r->http.port, 1003);
  EXPECT_EQ(r->http.host, "flag.example");
  EXPECT_EQ(r->service.text.scheduler.queue.max_batch_size, 24);
  EXPECT_EQ(r->service.tensor.scheduler.queue.max_batch_size, 24);
  // A bare boolean flag is true and beats the environment's false.
  EXPECT_TRUE(r->service.lazy_loading);
  // File and environment: the environment wins.
  EXPECT_EQ(r->service.text.default_timeout_micros, 200'000);
  EXPECT_EQ(r->service.tensor.default_timeout_micros, 200'000);
  // File only.
  EXPECT_EQ(r->http.io_threads, 3);
  EXPECT_EQ(r->service.model_repository, "/file/models");
  EXPECT_EQ(r->service.text.scheduler.queue.max_enqueued_rows, 100);
}

TEST(ServerConfigTest, EnvironmentAloneOverridesDefaults) {
  auto r = Load({}, {{"TAILCUT_ENGINE_INTRA_OP_THREADS", "2"},
                     {"TAILCUT_LOG_LEVEL", "WARN"},
                     {"TAILCUT_MODELS_DEFAULT", ""}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->engine.intra_op_threads, 2);
  EXPECT_EQ(r->log_level, "warn");  // Choices match case-insensitively, stored as listed.
  EXPECT_EQ(r->service.default_model, "");
}

TEST(ServerConfigTest, EmptyEnvironmentValueOverridesTheFile) {
  // An empty value is a value: it sets models.default back to "first model found".
  const std::string path = WriteFile("default_model.yaml", "models:\n  default: minilm\n");
  auto r = Load({"--config", path}, {{"TAILCUT_MODELS_DEFAULT", ""}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->service.default_model, "");
}

TEST(ServerConfigTest, FlagAliases) {
  auto r = Load({"--host", "0.0.0.0", "--model-repository", "/m", "--default-model", "x",
                 "--threads", "6", "--batch-timeout-micros", "250", "--max-queue", "64"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->http.host, "0.0.0.0");
  EXPECT_EQ(r->service.model_repository, "/m");
  EXPECT_EQ(r->service.default_model, "x");
  EXPECT_EQ(r->engine.intra_op_threads, 6);
  EXPECT_EQ(r->service.text.scheduler.queue.batch_timeout_micros, 250);
  EXPECT_EQ(r->service.tensor.scheduler.queue.max_enqueued_rows, 64);
}

TEST(ServerConfigTest, FlagGivenTwiceTakesTheLast) {
  auto r =
      Load({"--port", "1", "--port", "2", "--models.lazy_loading", "--models.lazy_loading=no"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->http.port, 2);
  EXPECT_FALSE(r->service.lazy_loading);
}

TEST(ServerConfigTest, AliasAndFullFlagTogetherIsAnError) {
  EXPECT_EQ(ErrorOf(Load({"--port", "1", "--server.port", "2"})),
            "--server.port and --port are the same setting; give only one");
}

TEST(ServerConfigTest, PortZeroIsAllowed) {
  auto r = Load({"--port", "0"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->http.port, 0);  // HttpServer picks a free port.
}

TEST(ServerConfigTest, BooleanSpellings) {
  for (const auto& [text, want] : std::vector<std::pair<std::string, bool>>{{"true", true},
                                                                            {"false", false},
                                                                            {"1", true},
                                                                            {"0", false},
                                                                            {"yes", true},
                                                                            {"no", false},
                                                                            {"YES", true},
                                                                            {"False", false}}) {
    auto r = Load({}, {{"TAILCUT_ENGINE_ALLOW_SPINNING", text}});
    ASSERT_TRUE(r.ok()) << text << ": " << r.status().ToString();
    EXPECT_EQ(r->engine.allow_spinning, want) << text;
    r = Load({"--engine.allow_spinning=" + text});
    ASSERT_TRUE(r.ok()) << text << ": " << r.status().ToString();
    EXPECT_EQ(r->engine.allow_spinning, want) << text;
  }
  for (const std::string bad : {"on", "off", "2", "y", ""}) {
    EXPECT_TRUE(
        Contains(ErrorOf(Load({}, {{"TAILCUT_ENGINE_ALLOW_SPINNING", bad}})), "is not a boolean"))
        << bad;
  }
}

// ---------------------------------------------------------------------------------------------
// Bad values from each source

TEST(ServerConfigTest, BadEnvironmentValues) {
  EXPECT_EQ(ErrorOf(Load({}, {{"TAILCUT_SERVER_PORT", "abc"}})),
            "TAILCUT_SERVER_PORT=abc is not an integer");
  EXPECT_EQ(ErrorOf(Load({}, {{"TAILCUT_SERVER_PORT", "70000"}})),
            "TAILCUT_SERVER_PORT=70000 is too large: must be at most 65535");
  EXPECT_EQ(ErrorOf(Load({}, {{"TAILCUT_SERVER_PORT", "-1"}})),
            "TAILCUT_SERVER_PORT=-1 is too small: must be at least 0");
  EXPECT_EQ(ErrorOf(Load({}, {{"TAILCUT_SERVER_PORT", " 80"}})),
            "TAILCUT_SERVER_PORT=\" 80\" is not an integer");
  EXPECT_EQ(ErrorOf(Load({}, {{"TAILCUT_SERVER_PORT", ""}})),
            "TAILCUT_SERVER_PORT=\"\" is not an integer");
  EXPECT_EQ(ErrorOf(Load({}, {{"TAILCUT_ENGINE_INTRA_OP_THREADS", "-1"}})),
            "TAILCUT_ENGINE_INTRA_OP_THREADS=-1 is too small: must be at least 0");
  EXPECT_EQ(ErrorOf(Load({}, {{"TAILCUT_SERVER_HOST", ""}})),
            "TAILCUT_SERVER_HOST=\"\" must not be empty");
  EXPECT_EQ(ErrorOf(Load({}, {{"TAILCUT_LOG_LEVEL", "verbose"}})),
            "TAILCUT_LOG_LEVEL=verbose is not one of trace, debug, info, warn, error");
  EXPECT_EQ(ErrorOf(Load({}, {{"TAILCUT_ENGINE_GRAPH_OPTIMIZATION_LEVEL", "3"}})),
            "TAILCUT_ENGINE_GRAPH_OPTIMIZATION_LEVEL=3 is not one of 0, 1, 2, 99");
  EXPECT_EQ(ErrorOf(Load({}, {{"TAILCUT_BATCHING_MAX_BATCH_SIZE", "0"}})),
            "TAILCUT_BATCHING_MAX_BATCH_SIZE=0 is too small: must be at least 1");
  EXPECT_EQ(ErrorOf(Load({}, {{"TAILCUT_SERVER_IO_THREADS", "99999999999"}})),
            "TAILCUT_SERVER_IO_THREADS=99999999999 is too large: must be at most 2147483647");
  EXPECT_EQ(ErrorOf(Load({}, {{"TAILCUT_SERVER_MAX_BODY_BYTES", "99999999999999999999"}})),
            "TAILCUT_SERVER_MAX_BODY_BYTES=99999999999999999999 is too large: must be at most "
            "9223372036854775807");
  // Milliseconds are stored as microseconds, so the bound is what fits after scaling.
  EXPECT_EQ(ErrorOf(Load({}, {{"TAILCUT_REQUESTS_DEFAULT_TIMEOUT_MILLIS", "9223372036854776"}})),
            "TAILCUT_REQUESTS_DEFAULT_TIMEOUT_MILLIS=9223372036854776 is too large: must be at "
            "most 9223372036854775");
  EXPECT_EQ(ErrorOf(Load({}, {{"TAILCUT_SERVER_SHUTDOWN_GRACE_MILLIS", "-99999999999999999999"}})),
            "TAILCUT_SERVER_SHUTDOWN_GRACE_MILLIS=-99999999999999999999 is too small: must be at "
            "least 0");
  EXPECT_EQ(ErrorOf(Load({}, {{"TAILCUT_BATCHING_BATCH_TIMEOUT_MICROS", "1.5"}})),
            "TAILCUT_BATCHING_BATCH_TIMEOUT_MICROS=1.5 is not an integer");
}

TEST(ServerConfigTest, UnknownEnvironmentVariableInASection) {
  EXPECT_EQ(ErrorOf(Load({}, {{"TAILCUT_SERVER_PROT", "9000"}})),
            "unknown environment variable TAILCUT_SERVER_PROT (did you mean "
            "TAILCUT_SERVER_PORT?)");
  EXPECT_EQ(ErrorOf(Load({}, {{"TAILCUT_SERVER_MAX_BATCH_SIZE", "4"}})),
            "unknown environment variable TAILCUT_SERVER_MAX_BATCH_SIZE (did you mean "
            "TAILCUT_BATCHING_MAX_BATCH_SIZE?)");
  // Variables outside the settings' sections belong to someone else.
  auto r = Load({}, {{"TAILCUT_BUILD_DIR", "/b"}, {"TAILCUT_MODEL_DIR", "/m"}, {"PATH", "/x"}});
  EXPECT_TRUE(r.ok()) << r.status().ToString();
}

TEST(ServerConfigTest, BadFlagValues) {
  EXPECT_EQ(ErrorOf(Load({"--port", "abc"})), "--port=abc is not an integer");
  EXPECT_EQ(ErrorOf(Load({"--server.port=99999"})),
            "--server.port=99999 is too large: must be at most 65535");
  EXPECT_EQ(ErrorOf(Load({"--server.io_threads", "-1"})),
            "--server.io_threads=-1 is too small: must be at least 0");
  EXPECT_EQ(ErrorOf(Load({"--models.lazy_loading=maybe"})),
            "--models.lazy_loading=maybe is not a boolean (true/false, 1/0, yes/no)");
  EXPECT_EQ(ErrorOf(Load({"--max-queue", "0"})), "--max-queue=0 is too small: must be at least 1");
}

TEST(ServerConfigTest, UnknownFlagIsAParseError) {
  Harness h;
  EXPECT_THROW(h.Load({"--server.prot", "1"}), CLI::ParseError);
}

TEST(ServerConfigTest, EveryProblemIsReportedAtOnce) {
  const std::string path = WriteFile("many.yaml", "server:\n  prot: 1\n");
  const std::string error =
      ErrorOf(Load({"--config", path, "--threads", "x"}, {{"TAILCUT_SERVER_PORT", "y"}}));
  EXPECT_TRUE(Contains(error, "unknown key server.prot"));
  EXPECT_TRUE(Contains(error, "TAILCUT_SERVER_PORT=y is not an integer"));
  EXPECT_TRUE(Contains(error, "--threads=x is not an integer"));
}

TEST(ServerConfigTest, AValidFlagDoesNotHideABadEnvironmentValue) {
  // A bad value is reported even when a higher source overrides it: it is still a mistake.
  EXPECT_TRUE(Contains(ErrorOf(Load({"--port", "1"}, {{"TAILCUT_SERVER_PORT", "abc"}})),
                       "TAILCUT_SERVER_PORT=abc"));
}

TEST(ServerConfigTest, RedisClusterSettingsAreCheckedTogether) {
  auto ok = Load({"--redis.enabled", "--redis.cluster_nodes", "10.0.0.1:7000, 10.0.0.2:7001",
                  "--redis.cluster_topology_refresh_millis", "2000"});
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->service.redis.cluster_nodes, "10.0.0.1:7000, 10.0.0.2:7001");
  EXPECT_EQ(ok->service.redis.cluster_topology_refresh_millis, 2000);
  EXPECT_TRUE(Contains(ErrorOf(Load({"--redis.cluster_nodes", "10.0.0.1"})),
                       "redis.cluster_nodes: redis node address '10.0.0.1': no port"));
  EXPECT_TRUE(Contains(ErrorOf(Load({"--redis.cluster_nodes", "a:1", "--redis.db", "3"})),
                       "redis.db=3 with redis.cluster_nodes: a Redis Cluster has only database 0"));
  EXPECT_TRUE(Contains(ErrorOf(Load({"--redis.cluster_nodes", "a:1", "--redis.key_prefix", "{t}"})),
                       "hash tag"));
  // Standalone Redis keeps its databases and any prefix.
  EXPECT_TRUE(Load({"--redis.db", "3", "--redis.key_prefix", "{t}"}).ok());
}

}  // namespace
}  // namespace tailcut
