// The environment source: TAILCUT_<KEY> variables (TAILCUT_SERVER_PORT for server.port)
// applied to a ServerConfig through the settings table. A variable in a settings section
// that names no setting (TAILCUT_SERVER_PROT) is an error, with a suggestion; other TAILCUT_*
// variables (TAILCUT_CONFIG, other commands' variables) are not this source's. Internal to
// src/config.
//
// Thread-safety: ApplyEnvironment() touches only its arguments. ProcessEnvironment() reads
// `environ`, so it must not race with setenv()/putenv() (main calls it before starting
// threads).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "config/server_config.h"

namespace tailcut::config_internal {

// Applies every setting `env` (variable -> value) names to `config`. Each problem is appended
// to `errors` as one message; the settings without problems are still applied.
void ApplyEnvironment(const std::map<std::string, std::string>& env, ServerConfig* config,
                      std::vector<std::string>* errors);

// This process's environment as a map.
std::map<std::string, std::string> ProcessEnvironment();

}  // namespace tailcut::config_internal
