#include "config/environment_source.h"

#include <set>
#include <string_view>

#include "config/setting_names.h"
#include "config/settings.h"
#include "config/suggestions.h"
#include "config/value_parsing.h"

extern char** environ;  // POSIX; declared here so no feature-test macro is needed.

namespace tailcut::config_internal {

void ApplyEnvironment(const std::map<std::string, std::string>& env, ServerConfig* config,
                      std::vector<std::string>* errors) {
  std::set<std::string> env_names;
  std::vector<Candidate> candidates;
  for (const auto& s : Settings()) {
    const std::string name = EnvName(s.key);
    env_names.insert(name);
    candidates.push_back({name, EnvName(AfterFirst(s.key, '.')).substr(kEnvPrefix.size())});
    const auto it = env.find(name);
    if (it == env.end()) continue;
    std::string problem;
    const auto parsed = ParseValue(s, it->second, &problem);
    if (!parsed) {
      errors->push_back(name + "=" + ShowValue(it->second) + " " + problem);
      continue;
    }
    s.set(*config, *parsed);
  }
  // A variable in a settings section that names no setting is a typo (or a removed setting)
  // that would otherwise leave the default silently in force. Other TAILCUT_* variables
  // (TAILCUT_CONFIG, TAILCUT_MODEL_DIR of other commands, build variables) are not ours.
  for (const auto& [name, value] : env) {
    if (env_names.count(name) > 0) continue;
    for (const auto& [section, intro] : Sections()) {
      const std::string prefix = EnvName(section) + "_";
      if (name.starts_with(prefix)) {
        errors->push_back("unknown environment variable " + name +
                          Suggestion(name, name.substr(prefix.size()), candidates));
        break;
      }
    }
  }
}

std::map<std::string, std::string> ProcessEnvironment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const size_t eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return env;
}

}  // namespace tailcut::config_internal
