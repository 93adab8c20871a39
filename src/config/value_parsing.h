// Text -> value for one setting, shared by all three sources (YAML scalars, environment
// values, flag text) so that a value means the same whichever source it comes from; and
// value -> text for --help, the reference and FormatConfigValue(). The phrases returned for a
// bad value ("is not an integer") are the tail of the error the source reports after naming
// itself and the value: `TAILCUT_SERVER_PORT=abc is not an integer`. Internal to src/config.
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/settings.h"

namespace tailcut::config_internal {

// ASCII lower case (choices and booleans are matched case-insensitively).
std::string Lower(std::string_view s);

// "a, b, c".
std::string JoinChoices(const std::vector<std::string>& choices);

// The value as it appears in an error: quoted when it would otherwise be invisible or
// ambiguous (empty, or with spaces at an end).
std::string ShowValue(std::string_view text);

// Parses `text` for `s`: its kind, then its choices, range or non-emptiness. On failure
// returns nullopt and sets `problem` to a phrase that follows the value ("is not an
// integer", "is too large: must be at most 65535").
std::optional<Value> ParseValue(const Setting& s, std::string_view text, std::string* problem);

// "a boolean", "an integer", "a string": what a YAML value of the wrong shape should be.
std::string KindName(const Setting& s);

// A value as it would be written in YAML: "8080", "true", "models".
std::string FormatValue(const Value& v);

}  // namespace tailcut::config_internal
