#include "config/setting_names.h"

#include <cctype>

namespace tailcut::config_internal {

std::string EnvName(std::string_view key) {
  std::string env(kEnvPrefix);
  for (char ch : key) {
    env += ch == '.' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  }
  return env;
}

std::string FlagName(std::string_view key) {
  return "--" + std::string(key);
}

std::string_view SectionOf(std::string_view key) {
  return key.substr(0, key.find('.'));
}

std::string_view AfterFirst(std::string_view s, char separator) {
  const size_t pos = s.find(separator);
  return pos == std::string_view::npos ? s : s.substr(pos + 1);
}

}  // namespace tailcut::config_internal
