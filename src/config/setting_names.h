// The names a setting goes by, all derived from its dotted key (server.port): the
// environment variable (TAILCUT_SERVER_PORT), the flag (--server.port) and the section
// (server). Internal to src/config.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

namespace tailcut::config_internal {

// What every setting's environment variable starts with.
inline constexpr std::string_view kEnvPrefix = "TAILCUT_";

// "server.port" -> "TAILCUT_SERVER_PORT": the prefix, then the key upper-cased with dots
// replaced by underscores.
std::string EnvName(std::string_view key);

// "server.port" -> "--server.port".
std::string FlagName(std::string_view key);

// "server.port" -> "server": the part before the first dot (all of `key` without one).
std::string_view SectionOf(std::string_view key);

// The part of `s` after the first `separator`, or all of `s` without one.
std::string_view AfterFirst(std::string_view s, char separator);

}  // namespace tailcut::config_internal
