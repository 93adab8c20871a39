#include "server/generation_params.h"

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

#include "server/json_body.h"

namespace tailcut {
namespace {

std::string Name(std::string_view prefix, std::string_view field) {
  return "field '" + std::string(prefix) + std::string(field) + "'";
}

std::string Shortest(double v) {
  std::string s = std::to_string(v);
  while (s.size() > 1 && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

// A number in [lo, hi] (`lo_open`: lo itself excluded), or nullopt when absent.
Result<std::optional<double>> Number(const nlohmann::json& obj, std::string_view prefix,
                                     const char* field, double lo, double hi,
                                     bool lo_open = false) {
  auto it = obj.find(field);
  if (it == obj.end() || it->is_null()) return std::optional<double>();
  const std::string range = (lo_open ? "in (" : "between ") + Shortest(lo) +
                            (lo_open ? ", " : " and ") + Shortest(hi) + (lo_open ? "]" : "");
  if (!it->is_number()) {
    return Status::InvalidArgument(Name(prefix, field) + " must be a number " + range +
                                   ", got " + JsonTypeName(*it));
  }
  const double v = it->get<double>();
  if (!std::isfinite(v) || v > hi || v < lo || (lo_open && v == lo)) {
    return Status::InvalidArgument(Name(prefix, field) + " must be a number " + range +
                                   ", got " + it->dump());
  }
  return std::optional<double>(v);
}

Result<std::optional<int64_t>> Integer(const nlohmann::json& obj, std::string_view prefix,
                                       const char* field) {
  auto it = obj.find(field);
  if (it == obj.end() || it->is_null()) return std::optional<int64_t>();
  if (!it->is_number_integer() || (it->is_number_unsigned() && it->get<uint64_t>() > INT64_MAX)) {
    return Status::InvalidArgument(Name(prefix, field) + " must be an integer, got " +
                                   (it->is_number() ? it->dump() : JsonTypeName(*it)));
  }
  return std::optional<int64_t>(it->get<int64_t>());
}

Result<std::optional<int32_t>> MaxTokens(const nlohmann::json& obj, std::string_view prefix,
                                         const char* field) {
  auto v = Integer(obj, prefix, field);
  if (!v.ok()) return v.status();
  if (!v->has_value()) return std::optional<int32_t>();
  if (**v <= 0 || **v > INT32_MAX) {
    return Status::InvalidArgument(Name(prefix, field) + " must be a positive integer, got " +
                                   std::to_string(**v));
  }
  return std::optional<int32_t>(static_cast<int32_t>(**v));
}

Status ReadStop(const nlohmann::json& obj, std::string_view prefix, GenerateRequest* request) {
  auto it = obj.find("stop");
  if (it == obj.end() || it->is_null()) return Status::Ok();
  std::vector<std::string> stop;
  if (it->is_string()) {
    stop.push_back(it->get<std::string>());
  } else if (it->is_array()) {
    if (it->size() > kMaxStopStrings) {
      return Status::InvalidArgument(Name(prefix, "stop") + " may hold at most " +
                                     std::to_string(kMaxStopStrings) + " strings, got " +
                                     std::to_string(it->size()));
    }
    for (size_t i = 0; i < it->size(); ++i) {
      if (!(*it)[i].is_string()) {
        return Status::InvalidArgument(Name(prefix, "stop[" + std::to_string(i) + "]") +
                                       " must be a string, got " + JsonTypeName((*it)[i]));
      }
      stop.push_back((*it)[i].get<std::string>());
    }
  } else {
    return Status::InvalidArgument(Name(prefix, "stop") +
                                   " must be a string or an array of strings, got " +
                                   JsonTypeName(*it));
  }
  for (size_t i = 0; i < stop.size(); ++i) {
    if (stop[i].empty()) {
      return Status::InvalidArgument(Name(prefix, "stop") + " must not hold an empty string");
    }
  }
  request->stop = std::move(stop);
  return Status::Ok();
}

}  // namespace

Status ReadGenerationParams(const nlohmann::json& obj, std::string_view prefix,
                            bool allow_max_completion_tokens, GenerateRequest* request) {
  auto max_tokens = MaxTokens(obj, prefix, "max_tokens");
  if (!max_tokens.ok()) return max_tokens.status();
  if (allow_max_completion_tokens) {
    auto completion = MaxTokens(obj, prefix, "max_completion_tokens");
    if (!completion.ok()) return completion.status();
    if (completion->has_value()) {
      if (max_tokens->has_value() && **max_tokens != **completion) {
        return Status::InvalidArgument(Name(prefix, "max_completion_tokens") + " (" +
                                       std::to_string(**completion) + ") and " +
                                       Name(prefix, "max_tokens") + " (" +
                                       std::to_string(**max_tokens) + ") disagree; send one");
      }
      max_tokens = completion;
    }
  }
  if (max_tokens->has_value()) request->max_tokens = **max_tokens;

  SamplingParams& s = request->sampling;
  auto temperature = Number(obj, prefix, "temperature", 0.0, 2.0);
  if (!temperature.ok()) return temperature.status();
  if (temperature->has_value()) s.temperature = static_cast<float>(**temperature);
  auto top_p = Number(obj, prefix, "top_p", 0.0, 1.0, /*lo_open=*/true);
  if (!top_p.ok()) return top_p.status();
  if (top_p->has_value()) s.top_p = static_cast<float>(**top_p);
  auto presence = Number(obj, prefix, "presence_penalty", -2.0, 2.0);
  if (!presence.ok()) return presence.status();
  if (presence->has_value()) s.presence_penalty = static_cast<float>(**presence);
  auto frequency = Number(obj, prefix, "frequency_penalty", -2.0, 2.0);
  if (!frequency.ok()) return frequency.status();
  if (frequency->has_value()) s.frequency_penalty = static_cast<float>(**frequency);

  auto top_k = Integer(obj, prefix, "top_k");
  if (!top_k.ok()) return top_k.status();
  if (top_k->has_value()) {
    // -1 is vLLM's spelling of "all", as 0 is llama.cpp's.
    if (**top_k < -1 || **top_k > INT32_MAX) {
      return Status::InvalidArgument(Name(prefix, "top_k") +
                                     " must be 0 or -1 (all tokens) or a positive integer, got " +
                                     std::to_string(**top_k));
    }
    s.top_k = **top_k <= 0 ? 0 : static_cast<int32_t>(**top_k);
  }
  auto seed = Integer(obj, prefix, "seed");
  if (!seed.ok()) return seed.status();
  if (seed->has_value()) {
    // 4294967295 is llama.cpp's "draw a seed": not a fixed one, so it is not accepted.
    if (**seed < 0 || **seed >= int64_t{UINT32_MAX}) {
      return Status::InvalidArgument(Name(prefix, "seed") +
                                     " must be an integer between 0 and 4294967294, got " +
                                     std::to_string(**seed));
    }
    s.seed = static_cast<uint32_t>(**seed);
  }
  return ReadStop(obj, prefix, request);
}

}  // namespace tailcut
