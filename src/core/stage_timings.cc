#include "core/stage_timings.h"

#include <cstdio>
#include <string_view>
#include <vector>

namespace tailcut {

std::string StageTimings::ToServerTiming() const {
  const std::pair<const char*, int64_t> stages[] = {
      {"parse", parse_micros},           {"tokenize", tokenize_micros},   {"cache", cache_micros},
      {"preprocess", preprocess_micros}, {"queue", queue_micros},         {"batch", batch_micros},
      {"infer", infer_micros},           {"serialize", serialize_micros}, {"total", total_micros}};
  // Image decoding is listed only where it happened: text requests keep their stages.
  std::vector<std::pair<const char*, int64_t>> shown;
  for (const auto& stage : stages) {
    if (stage.second > 0 || std::string_view(stage.first) != "preprocess") shown.push_back(stage);
  }
  return FormatServerTiming(shown);
}

std::string FormatServerTiming(std::span<const std::pair<const char*, int64_t>> stages) {
  std::string out;
  char buf[64];
  for (const auto& [name, micros] : stages) {
    std::snprintf(buf, sizeof(buf), "%s%s;dur=%.3f", out.empty() ? "" : ", ", name,
                  static_cast<double>(micros) / 1000.0);
    out += buf;
  }
  return out;
}

}  // namespace tailcut
