// ConfigReferenceMarkdown(): the generator of docs/configuration.md, the precedence rules and
// one table per section with every setting's key, variable, flags, type, default and
// description, all read from the settings table.
#include <string>
#include <string_view>
#include <vector>

#include "config/server_config.h"
#include "config/setting_names.h"
#include "config/settings.h"
#include "config/value_parsing.h"

namespace tailcut {
namespace {

using config_internal::EnvName;
using config_internal::FlagName;
using config_internal::FormatValue;
using config_internal::JoinChoices;
using config_internal::Kind;
using config_internal::SectionOf;
using config_internal::Sections;
using config_internal::Setting;
using config_internal::Settings;

std::string TypeDescription(const Setting& s) {
  switch (s.kind) {
    case Kind::kBool:
      return "boolean";
    case Kind::kString:
      if (!s.choices.empty()) {
        std::string out = "one of ";
        for (size_t i = 0; i < s.choices.size(); ++i) {
          out += (i ? ", `" : "`") + s.choices[i] + "`";
        }
        return out;
      }
      return s.non_empty ? "non-empty string" : "string";
    case Kind::kInt:
      if (!s.choices.empty()) return "one of " + JoinChoices(s.choices);
      if (s.explicit_min && s.explicit_max) {
        return "integer " + std::to_string(s.min) + ".." + std::to_string(s.max);
      }
      if (s.explicit_min) return "integer >= " + std::to_string(s.min);
      return "integer";
  }
  return "";
}

std::string EscapeCell(std::string_view text) {
  std::string out;
  for (char ch : text) {
    if (ch == '|') out += '\\';
    out += ch;
  }
  return out;
}

}  // namespace

std::string ConfigReferenceMarkdown() {
  const ServerConfig defaults;
  std::string md;
  md +=
      "# Configuration\n"
      "\n"
      "<!-- Generated from the settings table in src/config/server_config.cc by\n"
      "     ConfigReferenceMarkdown(); do not edit by hand. config_test fails when this file\n"
      "     is stale and prints the command that regenerates it. -->\n"
      "\n"
      "`tailcut serve` takes every setting from four places. Each overrides the ones above "
      "it:\n"
      "\n"
      "1. **Built-in defaults** (the Default column below).\n"
      "2. **A YAML config file**, named by `--config PATH` or else by `$TAILCUT_CONFIG`. "
      "Without either, no file is read. `--config \"\"` reads none even when "
      "`$TAILCUT_CONFIG` is set.\n"
      "3. **Environment variables**: `TAILCUT_` followed by the key upper-cased, dots "
      "replaced by underscores.\n"
      "4. **Command-line flags**: `--` followed by the key, and a short alias for the common "
      "settings. A flag given twice takes its last value.\n"
      "\n"
      "So `server.port` is written `server: {port: 9000}` in the file (one nested map per "
      "dot), `TAILCUT_SERVER_PORT=9000` in the environment, and `--server.port 9000` or "
      "`--port 9000` on the command line. [example-config.yaml](example-config.yaml) is an "
      "example file.\n"
      "\n"
      "Mistakes stop the server at start-up with a message naming the source and the value "
      "(`config.yaml:3:9: server.port=abc is not an integer`, `TAILCUT_SERVER_PORT=abc is "
      "not an integer`): unknown keys in the file, unknown `TAILCUT_<SECTION>_*` variables "
      "(a typo must not leave a default silently in force), values of the wrong type, and "
      "values out of range. A bad value is an error even where a higher source overrides "
      "it. Every mistake is reported at once.\n"
      "\n"
      "Booleans accept `true`/`false`, `1`/`0` and `yes`/`no`. A boolean flag given bare "
      "means true (`--models.lazy_loading`); give a value with `=` "
      "(`--models.lazy_loading=false`). Relative paths are relative to the working folder, "
      "not to the config file.\n";

  const std::vector<Setting>& settings = Settings();
  for (const auto& [section, intro] : Sections()) {
    md += "\n## " + section + "\n\n" + intro + "\n\n";
    md += "| Key | Environment variable | Flag | Type | Default | Description |\n";
    md += "|---|---|---|---|---|---|\n";
    for (const auto& s : settings) {
      if (SectionOf(s.key) != section) continue;
      std::string flags = "`" + FlagName(s.key) + "`";
      if (!s.alias.empty()) flags += ", `" + s.alias + "`";
      const std::string value = FormatValue(s.get(defaults));
      const std::string shown = value.empty() ? "`\"\"`" : "`" + value + "`";
      md += "| `" + s.key + "` | `" + EnvName(s.key) + "` | " + flags + " | " +
            EscapeCell(TypeDescription(s)) + " | " + EscapeCell(shown) + " | " +
            EscapeCell(s.description) + " |\n";
    }
  }
  return md;
}

}  // namespace tailcut
