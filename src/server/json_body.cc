#include "server/json_body.h"

#include <charconv>
#include <cmath>

namespace tailcut {

std::string JsonTypeName(const nlohmann::json& j) {
  if (j.is_null()) return "null";
  if (j.is_boolean()) return "boolean";
  if (j.is_number()) return "number";
  if (j.is_string()) return "string";
  if (j.is_array()) return "array";
  return "object";
}

Result<nlohmann::json> ParseJsonObject(std::string_view body) {
  if (body.empty()) return Status::InvalidArgument("request body is empty; expected a JSON object");
  // One parse, with exceptions: they cost nothing on success, and on failure carry the
  // position for the message (the no-exception parse only says "discarded", and parsing a
  // second time to learn why doubled the work a bad body costs). Catch them all: a number
  // too large for a double ("1e400") is out_of_range, not parse_error, and one escaping here
  // would end the IO thread and the process.
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(body);
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument(std::string("request body is not valid JSON: ") + e.what());
  }
  if (!j.is_object()) {
    return Status::InvalidArgument("request body must be a JSON object, got " + JsonTypeName(j));
  }
  return j;
}

Result<std::vector<std::string>> ReadStringOrStringArray(const nlohmann::json& obj,
                                                         const char* field) {
  auto it = obj.find(field);
  if (it == obj.end() || it->is_null()) {
    return Status::InvalidArgument(std::string("field '") + field + "' is required");
  }
  std::vector<std::string> out;
  if (it->is_string()) {
    out.push_back(it->get<std::string>());
    return out;
  }
  if (!it->is_array()) {
    return Status::InvalidArgument(std::string("field '") + field +
                                   "' must be a string or an array of strings, got " +
                                   JsonTypeName(*it));
  }
  if (it->empty()) {
    return Status::InvalidArgument(std::string("field '") + field + "' must not be empty");
  }
  out.reserve(it->size());
  for (size_t i = 0; i < it->size(); ++i) {
    const auto& v = (*it)[i];
    if (!v.is_string()) {
      if (v.is_number_integer() || v.is_array()) {
        return Status::InvalidArgument(std::string("field '") + field + "[" + std::to_string(i) +
                                       "]' is a token array; send text (token ids of other "
                                       "tokenizers mean nothing to this model)");
      }
      return Status::InvalidArgument(std::string("field '") + field + "[" + std::to_string(i) +
                                     "]' must be a string, got " + JsonTypeName(v));
    }
    out.push_back(v.get<std::string>());
  }
  return out;
}

Result<std::optional<bool>> ReadOptionalBool(const nlohmann::json& obj, const char* field) {
  auto it = obj.find(field);
  if (it == obj.end() || it->is_null()) return std::optional<bool>();
  if (!it->is_boolean()) {
    return Status::InvalidArgument(std::string("field '") + field + "' must be a boolean, got " +
                                   JsonTypeName(*it));
  }
  return std::optional<bool>(it->get<bool>());
}

Result<std::optional<std::string>> ReadOptionalString(const nlohmann::json& obj,
                                                      const char* field) {
  auto it = obj.find(field);
  if (it == obj.end() || it->is_null()) return std::optional<std::string>();
  if (!it->is_string()) {
    return Status::InvalidArgument(std::string("field '") + field + "' must be a string, got " +
                                   JsonTypeName(*it));
  }
  return std::optional<std::string>(it->get<std::string>());
}

Result<std::optional<int64_t>> ReadOptionalInt(const nlohmann::json& obj, const char* field) {
  auto it = obj.find(field);
  if (it == obj.end() || it->is_null()) return std::optional<int64_t>();
  if (!it->is_number_integer()) {
    return Status::InvalidArgument(std::string("field '") + field + "' must be an integer, got " +
                                   JsonTypeName(*it));
  }
  return std::optional<int64_t>(it->get<int64_t>());
}

Result<std::optional<double>> ReadOptionalNumber(const nlohmann::json& obj, const char* field) {
  auto it = obj.find(field);
  if (it == obj.end() || it->is_null()) return std::optional<double>();
  if (!it->is_number()) {
    return Status::InvalidArgument(std::string("field '") + field + "' must be a number, got " +
                                   JsonTypeName(*it));
  }
  return std::optional<double>(it->get<double>());
}

namespace {

template <typename T>
std::optional<size_t> FirstNonFinite(std::span<const T> values) {
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) return i;
  }
  return std::nullopt;
}

}  // namespace

std::optional<size_t> FindNonFinite(std::span<const float> values) {
  return FirstNonFinite(values);
}

std::optional<size_t> FindNonFinite(std::span<const double> values) {
  return FirstNonFinite(values);
}

void AppendFloatArray(std::span<const float> values, std::string* out) {
  out->push_back('[');
  char buf[32];
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) out->push_back(',');
    if (!std::isfinite(values[i])) {
      out->append("null");  // A caller's bug (see the header); the text stays JSON.
      continue;
    }
    auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), values[i]);
    out->append(buf, end);
  }
  out->push_back(']');
}

void AppendJsonString(std::string_view s, std::string* out) {
  out->push_back('"');
  for (char c : s) {
    switch (c) {
      case '"': out->append("\\\""); break;
      case '\\': out->append("\\\\"); break;
      case '\n': out->append("\\n"); break;
      case '\r': out->append("\\r"); break;
      case '\t': out->append("\\t"); break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out->append(buf);
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

std::string Base64Encode(std::span<const unsigned char> bytes) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const uint32_t v = (bytes[i] << 16) | (bytes[i + 1] << 8) | bytes[i + 2];
    out.push_back(kAlphabet[(v >> 18) & 63]);
    out.push_back(kAlphabet[(v >> 12) & 63]);
    out.push_back(kAlphabet[(v >> 6) & 63]);
    out.push_back(kAlphabet[v & 63]);
  }
  if (i < bytes.size()) {
    uint32_t v = bytes[i] << 16;
    if (i + 1 < bytes.size()) v |= bytes[i + 1] << 8;
    out.push_back(kAlphabet[(v >> 18) & 63]);
    out.push_back(kAlphabet[(v >> 12) & 63]);
    out.push_back(i + 1 < bytes.size() ? kAlphabet[(v >> 6) & 63] : '=');
    out.push_back('=');
  }
  return out;
}

}  // namespace tailcut
