// The config file source: a YAML file of nested maps, one per dot of a key
// (`server: {port: 8080}`), applied to a ServerConfig through the settings table. Unknown
// keys (with a suggestion), dotted keys, repeated keys, values of the wrong shape or type and
// out-of-range values are errors naming file:line:column. Internal to src/config.
//
// Thread-safety: ApplyConfigFile() touches only its arguments (and reads the immutable
// settings table); concurrent calls with distinct arguments are safe.
#pragma once

#include <string>
#include <vector>

#include "config/server_config.h"

namespace tailcut::config_internal {

// Reads the YAML file at `path` and applies every setting it names to `config`. Each problem
// is appended to `errors` as one message; the settings without problems are still applied.
// An empty file (or one of comments only) sets nothing.
void ApplyConfigFile(const std::string& path, ServerConfig* config,
                     std::vector<std::string>* errors);

}  // namespace tailcut::config_internal
