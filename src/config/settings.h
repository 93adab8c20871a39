// The settings table's internals: what one setting is (its type, range, choices and the
// accessors that read and write its field(s) in a ServerConfig), the builders the table is
// written with (Field, Bind), and lookups over the table. The table itself, one entry per
// setting in reference order, is BuildSettings() in server_config.cc; everything else in
// src/config (value parsing, the sources, the reference generator) reads it through this
// header. Internal to src/config: code outside it includes server_config.h.
//
// Thread-safety: the table is built on first use (a function-local static, so the first use
// may come from any thread) and never changes after, so every function here is safe from any
// thread. A Setting's set() writes the ServerConfig it is given, and nothing else.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "config/server_config.h"

namespace tailcut::config_internal {

enum class Kind { kInt, kBool, kString };

// A parsed value, before it is stored in its field(s). Integers travel as int64_t in the
// setting's own unit (the key's: requests.default_timeout_millis carries milliseconds).
using Value = std::variant<int64_t, bool, std::string>;

constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

struct Setting {
  std::string key;
  Kind kind = Kind::kString;
  std::string description;
  std::string alias;  // A short flag ("--port"), or empty.
  // Integers: the accepted range. It starts as what the field's type can hold (divided by
  // the unit scale) and is narrowed by AtLeast()/AtMost(); the explicit flags record which
  // bounds are the setting's own, for the reference's Type column.
  int64_t min = kInt64Min;
  int64_t max = kInt64Max;
  bool explicit_min = false;
  bool explicit_max = false;
  // Closed set of accepted values (matched case-insensitively, stored as listed); empty = any.
  std::vector<std::string> choices;
  bool non_empty = false;  // Strings: "" is refused.

  std::function<void(ServerConfig&, const Value&)> set;
  std::function<Value(const ServerConfig&)> get;
  // False when the fields a setting writes (text and tensor servables, say) hold different
  // values, in which case get() could not name "the" default. Checked by a test.
  std::function<bool(const ServerConfig&)> consistent;

  Setting&& Alias(std::string flag) && {
    alias = std::move(flag);
    return std::move(*this);
  }
  Setting&& AtLeast(int64_t v) && {
    min = std::max(min, v);
    explicit_min = true;
    return std::move(*this);
  }
  Setting&& AtMost(int64_t v) && {
    max = std::min(max, v);
    explicit_max = true;
    return std::move(*this);
  }
  Setting&& OneOf(std::vector<std::string> values) && {
    choices = std::move(values);
    return std::move(*this);
  }
  Setting&& NonEmpty() && {
    non_empty = true;
    return std::move(*this);
  }
};

template <typename F>
Value ReadField(const F& field, int64_t scale) {
  if constexpr (std::is_same_v<F, bool> || std::is_same_v<F, std::string>) {
    return field;
  } else {
    return static_cast<int64_t>(field) / scale;
  }
}

template <typename F>
void StoreField(F& field, const Value& value, int64_t scale) {
  if constexpr (std::is_same_v<F, bool> || std::is_same_v<F, std::string>) {
    field = std::get<F>(value);
  } else {
    // In range by construction: the setting's bounds are the field type's divided by scale.
    field = static_cast<F>(std::get<int64_t>(value) * scale);
  }
}

// A setting stored in one or more fields, each named by an accessor `[](auto& c) -> auto& {
// return c.some.field; }` (generic, so one lambda serves reads and writes). The first field
// is the one read back; the others receive the same value (text and tensor servables share
// batching settings). `scale` converts the key's unit to the field's (millis -> micros).
template <typename Access, typename... More>
Setting Bind(std::string key, std::string description, int64_t scale, Access access, More... more) {
  using F = std::remove_cvref_t<decltype(access(std::declval<ServerConfig&>()))>;
  static_assert(
      (std::is_same_v<F, std::remove_cvref_t<decltype(more(std::declval<ServerConfig&>()))>> &&
       ...),
      "every field of one setting must have the same type");
  Setting s;
  s.key = std::move(key);
  s.description = std::move(description);
  if constexpr (std::is_same_v<F, bool>) {
    s.kind = Kind::kBool;
  } else if constexpr (std::is_same_v<F, std::string>) {
    s.kind = Kind::kString;
  } else {
    static_assert(std::is_integral_v<F>, "settings are integers, booleans or strings");
    s.kind = Kind::kInt;
    if constexpr (std::is_signed_v<F>) {
      s.min = static_cast<int64_t>(std::numeric_limits<F>::min()) / scale;
    } else {
      s.min = 0;
    }
    const uint64_t type_max = static_cast<uint64_t>(std::numeric_limits<F>::max());
    s.max = static_cast<int64_t>(std::min<uint64_t>(type_max, kInt64Max)) / scale;
  }
  s.set = [=](ServerConfig& c, const Value& v) {
    StoreField(access(c), v, scale);
    (StoreField(more(c), v, scale), ...);
  };
  s.get = [=](const ServerConfig& c) { return ReadField(access(c), scale); };
  s.consistent = [=](const ServerConfig& c) {
    const Value first = ReadField(access(c), scale);
    return ((ReadField(more(c), scale) == first) && ...);
  };
  return s;
}

template <typename Access, typename... More>
Setting Field(std::string key, std::string description, Access access, More... more) {
  return Bind(std::move(key), std::move(description), 1, access, more...);
}

// Every setting, in table (and reference) order.
const std::vector<Setting>& Settings();

// The sections (the first part of keys), in reference order, each with the line that
// introduces its table in the reference.
const std::vector<std::pair<std::string, std::string>>& Sections();

// The setting whose key is `key`, or nullptr.
const Setting* FindSetting(std::string_view key);

// Whether `path` names a section (a proper prefix of some key at a dot).
bool IsSection(std::string_view path);

}  // namespace tailcut::config_internal
