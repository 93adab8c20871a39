// ServerConfig: every setting of `tailcut serve`, and the loader that fills it from three
// sources. One table of settings (server_config.cc) drives all of them, so the YAML file, the
// environment and the command line can never disagree about a setting's name, type or range:
//
//   key               server.port            (dotted; the table's primary name)
//   YAML              server: {port: 8080}   (one nested map per dot)
//   environment       TAILCUT_SERVER_PORT    (TAILCUT_ + key upper-cased, dots -> underscores)
//   command line      --server.port 8080     (plus short aliases for common ones: --port)
//
// Precedence, lowest to highest:
//   built-in defaults < config file < environment variables < command-line flags
// The config file is named by --config PATH, else by $TAILCUT_CONFIG; without either there is
// none. The defaults are those of the option structs themselves (HttpServerOptions and
// friends): loading starts from a default-constructed ServerConfig and overwrites only what a
// source sets, so a default lives in exactly one place.
//
// Strictness: an unknown YAML key or TAILCUT_<SECTION>_* variable is an error naming it (a
// typo must not silently leave the default in force); so is a value of the wrong type or out
// of range. Errors name the source (file:line:column and key, variable, or flag) and the
// value.
//
// docs/configuration.md is ConfigReferenceMarkdown()'s output; a test fails when it is stale.
//
// This header is src/config's interface; the rest is internal to it, one concern per file:
//   server_config.cc          the settings table, one entry per setting (settings.h is the
//                             internal view of it: what a Setting is, lookups)
//   setting_names.h           TAILCUT_SERVER_PORT, --server.port, the section, from the key
//   value_parsing.h           text -> value (the same for every source), value -> text
//   suggestions.h             "did you mean" for unknown keys and variables
//   yaml_source.h             the config file
//   environment_source.h      TAILCUT_* variables
//   server_config_loader.cc   ServerConfigLoader: the flags, and the sources in order
//   reference_markdown.cc     ConfigReferenceMarkdown()
//
// Thread-safety: ServerConfig is a plain value. ServerConfigLoader is used by one thread
// (main) around argument parsing. ConfigReferenceMarkdown() and the other free functions are
// safe from any thread.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "core/inference_service.h"
#include "engine/ort_environment.h"
#include "obs/trace_exporter.h"
#include "server/auth.h"
#include "server/grpc/kserve_grpc_server.h"
#include "server/http_server.h"
#include "server/request_dispatcher.h"

namespace tailcut {

struct ServerConfig {
  HttpServerOptions http;
  // KServe v2 over gRPC, on its own port beside HTTP (same host and limits).
  GrpcServerOptions grpc;
  // OpenTelemetry traces (off without an endpoint).
  TraceExporterOptions tracing;
  // The threads that do requests' CPU work (parsing, tokenising, formatting answers), and
  // which requests count as heavy there.
  WorkPoolOptions work_pool;
  RequestDispatcherOptions dispatch;
  AuthOptions auth;
  InferenceServiceOptions service;
  OrtEnvironmentOptions engine;
  // Log threshold: trace, debug, info, warn or error.
  std::string log_level = "info";
  // How long SIGTERM waits for in-flight requests before closing connections. Long enough
  // for a queued batch to finish; short enough for an orchestrator's kill timeout (often
  // 30 s) not to strike first.
  int64_t shutdown_grace_millis = 10'000;
  // After SIGTERM, how long new connections are still accepted (and answered with
  // Connection: close) before the listener closes: covers clients that sent just as the
  // signal came and load balancers that take a moment to see the server not ready.
  int64_t shutdown_delay_millis = 200;
  // Requests slower than this, from arrival to response, are logged with their stage
  // breakdown; 0 = none. Set at the latency SLO so every SLO miss leaves a trace of where its
  // time went. Under overload every request misses, so the log sink must rate-limit.
  int64_t slow_request_log_millis = 86;
};

// Registers --config and one flag per setting on a (sub)command, then, after CLI11 has parsed
// the command line, builds the ServerConfig from file, environment and flags.
//
// The flags store raw text, which Load() parses exactly as it parses environment values, so a
// value means the same thing whichever source it comes from. Boolean flags may be given bare
// (`--models.lazy_loading` = true) or with a value (`--models.lazy_loading=false`). A flag
// given twice takes the last value, so scripts can append overrides.
class ServerConfigLoader {
 public:
  // `cmd` must outlive this loader's use; the loader must outlive `cmd`'s parsing (the
  // options write into it), hence no copies or moves.
  explicit ServerConfigLoader(CLI::App& cmd);
  ServerConfigLoader(const ServerConfigLoader&) = delete;
  ServerConfigLoader& operator=(const ServerConfigLoader&) = delete;

  // Applies the config file, the environment and the flags, in that order, to a
  // default-constructed ServerConfig. `env_override`, when given, replaces the process
  // environment entirely (tests). Every problem found is reported, joined by "; ", as
  // InvalidArgument.
  Result<ServerConfig> Load(const std::map<std::string, std::string>* env_override = nullptr);

  // The config file the last Load() read, or empty when there was none.
  const std::string& config_path() const { return config_path_; }

 private:
  // One registered flag and the raw text CLI11 stores for it when given.
  struct Flag {
    size_t setting = 0;  // Index into the settings table.
    std::string name;    // As typed: "--server.port" or its alias "--port".
    CLI::Option* option = nullptr;
    std::string raw;
  };

  CLI::Option* config_option_ = nullptr;
  std::string config_raw_;
  std::deque<Flag> flags_;  // A deque: CLI11 holds references to each `raw`, which must not move.
  std::string config_path_;
};

// The whole of docs/configuration.md: precedence, then one table row per setting with its
// key, environment variable, flags, type, default (read from a default-constructed
// ServerConfig) and description.
std::string ConfigReferenceMarkdown();

// Every setting's dotted key, in table order.
std::vector<std::string> ConfigKeys();

// One setting's value in `config` as it would be written in YAML ("8080", "true", "models");
// nullopt for an unknown key. For printing the effective configuration.
std::optional<std::string> FormatConfigValue(const ServerConfig& config, std::string_view key);

namespace config_internal {
// Exposed for tests. The first key whose fields (text and tensor servables, say) hold
// different defaults, or empty. The reference shows one default per key, which is only true
// when they agree.
std::string FirstInconsistentDefault();
}  // namespace config_internal

}  // namespace tailcut
