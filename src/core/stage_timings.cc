#include "core/stage_timings.h"

#include <cstdio>

namespace tailcut {

std::string StageTimings::ToServerTiming() const {
  const std::pair<const char*, int64_t> stages[] = {
      {"parse", parse_micros},         {"tokenize", tokenize_micros}, {"cache", cache_micros},
      {"queue", queue_micros},         {"batch", batch_micros},       {"infer", infer_micros},
      {"serialize", serialize_micros}, {"total", total_micros}};
  if (preprocess_micros <= 0) return FormatServerTiming(stages);
  const std::pair<const char*, int64_t> with_images[] = {
      {"parse", parse_micros}, {"preprocess", preprocess_micros}, {"queue", queue_micros},
      {"batch", batch_micros}, {"infer", infer_micros},           {"serialize", serialize_micros},
      {"total", total_micros}};
  return FormatServerTiming(with_images);
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
