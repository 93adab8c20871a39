// ServerConfigLoader: registers --config and one flag per setting (and its alias) on the
// serve command, then applies the sources in precedence order: the config file, the
// environment, the flags.
#include <CLI/CLI.hpp>
#include <map>
#include <string>
#include <vector>

#include "cache/redis_cluster_slots.h"
#include "config/environment_source.h"
#include "config/server_config.h"
#include "config/setting_names.h"
#include "config/settings.h"
#include "config/value_parsing.h"
#include "config/yaml_source.h"

namespace tailcut {

using config_internal::ApplyConfigFile;
using config_internal::ApplyEnvironment;
using config_internal::EnvName;
using config_internal::FlagName;
using config_internal::FormatValue;
using config_internal::Kind;
using config_internal::ParseValue;
using config_internal::ProcessEnvironment;
using config_internal::Setting;
using config_internal::Settings;
using config_internal::ShowValue;

ServerConfigLoader::ServerConfigLoader(CLI::App& cmd) {
  config_option_ = cmd.add_option("--config", config_raw_,
                                  "YAML config file (overrides defaults; overridden by "
                                  "environment and flags) [env TAILCUT_CONFIG]");
  config_option_->type_name("PATH")->group("Common options");

  const ServerConfig defaults;  // Shown in --help only; Load() starts from its own.
  const std::vector<Setting>& settings = Settings();
  for (size_t i = 0; i < settings.size(); ++i) {
    const Setting& s = settings[i];
    const std::string type = s.kind == Kind::kBool  ? "[=BOOL]"
                             : s.kind == Kind::kInt ? "INT"
                             : !s.choices.empty()   ? "LEVEL"
                                                    : "TEXT";
    const auto add = [&](const std::string& name, const std::string& help,
                         const std::string& group) {
      Flag& flag = flags_.emplace_back();
      flag.setting = i;
      flag.name = name;
      // Booleans are flags, so `--models.lazy_loading` alone means true; `=false` still works.
      const std::string shown_default = FormatValue(s.get(defaults));
      if (s.kind == Kind::kBool) {
        // CLI11 would print "[=BOOL]=false", which reads like usage; say it in words.
        flag.option = cmd.add_flag(name, flag.raw, help + " (default " + shown_default + ")");
      } else {
        // default_str() is display only: nothing is stored unless the flag is given.
        flag.option = cmd.add_option(name, flag.raw, help)->default_str(shown_default);
      }
      flag.option->type_name(type)
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
          ->group(group);
    };
    add(FlagName(s.key), s.description + " [env " + EnvName(s.key) + "]",
        "Settings (see docs/configuration.md)");
    if (!s.alias.empty()) {
      // A separate option, not a second name of the first, so errors name the flag as typed.
      add(s.alias, s.description + " Same as " + FlagName(s.key) + ".", "Common options");
    }
  }
}

namespace {

// Settings that are only wrong together: a cluster's seeds must parse, and a cluster has only
// database 0 and hashes the whole stored key, so a '{' in the prefix (a hash tag) would put
// every key of the deployment in one slot, on one master.
void CheckRedisCluster(const ServerConfig& config, std::vector<std::string>* errors) {
  const RedisOptions& r = config.service.redis;
  if (r.cluster_nodes.empty()) return;
  if (Result<std::vector<RedisNodeAddress>> seeds = ParseRedisNodeList(r.cluster_nodes);
      !seeds.ok()) {
    errors->push_back("redis.cluster_nodes: " + seeds.status().message());
  }
  if (r.db != 0) {
    errors->push_back("redis.db=" + std::to_string(r.db) +
                      " with redis.cluster_nodes: a Redis Cluster has only database 0");
  }
  if (r.key_prefix.find('{') != std::string::npos) {
    errors->push_back("redis.key_prefix '" + r.key_prefix +
                      "' with redis.cluster_nodes: a '{' there is a hash tag that would put every "
                      "key in one slot, on one master");
  }
}

}  // namespace

Result<ServerConfig> ServerConfigLoader::Load(
    const std::map<std::string, std::string>* env_override) {
  const std::map<std::string, std::string> env =
      env_override != nullptr ? *env_override : ProcessEnvironment();
  ServerConfig config;
  std::vector<std::string> errors;

  // An explicit --config "" means no file, even when TAILCUT_CONFIG names one.
  config_path_.clear();
  if (config_option_->count() > 0) {
    config_path_ = config_raw_;
  } else if (const auto it = env.find("TAILCUT_CONFIG"); it != env.end()) {
    config_path_ = it->second;
  }
  if (!config_path_.empty()) ApplyConfigFile(config_path_, &config, &errors);

  ApplyEnvironment(env, &config, &errors);

  const std::vector<Setting>& settings = Settings();
  std::map<size_t, const Flag*> given;  // Setting -> the flag that set it.
  for (const Flag& flag : flags_) {
    if (flag.option->count() == 0) continue;
    // "--port 1 --server.port 2": CLI11 does not tell their order, so neither may win.
    if (const auto [it, first] = given.emplace(flag.setting, &flag); !first) {
      errors.push_back(it->second->name + " and " + flag.name +
                       " are the same setting; give only one");
      continue;
    }
    const Setting& s = settings[flag.setting];
    std::string problem;
    const auto parsed = ParseValue(s, flag.raw, &problem);
    if (!parsed) {
      errors.push_back(flag.name + "=" + ShowValue(flag.raw) + " " + problem);
      continue;
    }
    s.set(config, *parsed);
  }

  CheckRedisCluster(config, &errors);

  if (!errors.empty()) {
    std::string message;
    for (const auto& e : errors) message += (message.empty() ? "" : "; ") + e;
    return Status::InvalidArgument(message);
  }
  return config;
}

}  // namespace tailcut
