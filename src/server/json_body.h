// Helpers for reading request bodies as JSON with errors that name the offending field, and
// for writing float arrays quickly (shortest round-trip text via std::to_chars; embeddings
// are most of every response's bytes).
//
// Thread-safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace tailcut {

// Parses `body` as a JSON object; the error says where parsing failed.
Result<nlohmann::json> ParseJsonObject(std::string_view body);

// Reads `field` of `obj` as one string or an array of strings (the `input` / `inputs` shape
// shared by OpenAI and TEI). Absent: nullopt if optional, else an error naming the field.
Result<std::vector<std::string>> ReadStringOrStringArray(const nlohmann::json& obj,
                                                         const char* field);
// Optional typed fields: a wrong type is an error naming the field and the expected type.
Result<std::optional<bool>> ReadOptionalBool(const nlohmann::json& obj, const char* field);
Result<std::optional<std::string>> ReadOptionalString(const nlohmann::json& obj, const char* field);
Result<std::optional<int64_t>> ReadOptionalInt(const nlohmann::json& obj, const char* field);
// A number, integer or not.
Result<std::optional<double>> ReadOptionalNumber(const nlohmann::json& obj, const char* field);

// Index of the first NaN or infinity in `values`, if any. JSON has neither, and a model
// that emits them is broken: callers answer with an error naming the output instead of
// writing some number in their place.
std::optional<size_t> FindNonFinite(std::span<const float> values);
std::optional<size_t> FindNonFinite(std::span<const double> values);
// Appends `values` as a JSON array of numbers. They must be finite (FindNonFinite); one that
// is not is written as null, which no client reads as a number, never as a made-up value.
void AppendFloatArray(std::span<const float> values, std::string* out);
// Appends a JSON string literal (quoted, escaped).
void AppendJsonString(std::string_view s, std::string* out);
// Standard base64 (RFC 4648) of raw bytes.
std::string Base64Encode(std::span<const unsigned char> bytes);

// The JSON type name of `j` for error messages ("string", "number", ...).
std::string JsonTypeName(const nlohmann::json& j);

}  // namespace tailcut
