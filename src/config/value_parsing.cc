#include "config/value_parsing.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <system_error>

namespace tailcut::config_internal {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& ch : out) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}

std::string JoinChoices(const std::vector<std::string>& choices) {
  std::string out;
  for (const auto& c : choices) out += (out.empty() ? "" : ", ") + c;
  return out;
}

std::string ShowValue(std::string_view text) {
  const bool quote = text.empty() || std::isspace(static_cast<unsigned char>(text.front())) ||
                     std::isspace(static_cast<unsigned char>(text.back()));
  return quote ? "\"" + std::string(text) + "\"" : std::string(text);
}

std::optional<Value> ParseValue(const Setting& s, std::string_view text, std::string* problem) {
  switch (s.kind) {
    case Kind::kBool: {
      const std::string v = Lower(text);
      if (v == "true" || v == "1" || v == "yes") return Value(true);
      if (v == "false" || v == "0" || v == "no") return Value(false);
      *problem = "is not a boolean (true/false, 1/0, yes/no)";
      return std::nullopt;
    }
    case Kind::kInt: {
      int64_t v = 0;
      const char* end = text.data() + text.size();
      const auto [ptr, ec] = std::from_chars(text.data(), end, v);
      if (ec == std::errc::result_out_of_range && ptr == end) {
        *problem = text.front() == '-' ? "is too small: must be at least " + std::to_string(s.min)
                                       : "is too large: must be at most " + std::to_string(s.max);
        return std::nullopt;
      }
      if (ec != std::errc() || ptr != end || text.empty()) {
        *problem = "is not an integer";
        return std::nullopt;
      }
      if (!s.choices.empty() &&
          std::find(s.choices.begin(), s.choices.end(), std::to_string(v)) == s.choices.end()) {
        *problem = "is not one of " + JoinChoices(s.choices);
        return std::nullopt;
      }
      if (v < s.min) {
        *problem = "is too small: must be at least " + std::to_string(s.min);
        return std::nullopt;
      }
      if (v > s.max) {
        *problem = "is too large: must be at most " + std::to_string(s.max);
        return std::nullopt;
      }
      return Value(v);
    }
    case Kind::kString: {
      if (!s.choices.empty()) {
        const std::string v = Lower(text);
        for (const auto& c : s.choices) {
          if (v == c) return Value(c);
        }
        *problem = "is not one of " + JoinChoices(s.choices);
        return std::nullopt;
      }
      if (s.non_empty && text.empty()) {
        *problem = "must not be empty";
        return std::nullopt;
      }
      return Value(std::string(text));
    }
  }
  return std::nullopt;
}

std::string KindName(const Setting& s) {
  switch (s.kind) {
    case Kind::kBool:
      return "a boolean";
    case Kind::kInt:
      return "an integer";
    case Kind::kString:
      return "a string";
  }
  return "a value";
}

std::string FormatValue(const Value& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (const auto* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  return std::get<std::string>(v);
}

}  // namespace tailcut::config_internal
