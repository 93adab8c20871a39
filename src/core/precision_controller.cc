#include "core/precision_controller.h"

#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>

namespace tailcut {

PrecisionController::PrecisionController(const PrecisionPolicy& policy, const Clock& clock)
    : policy_(policy),
      clock_(clock),
      // The first switch may happen at once: dwell counts from the previous switch.
      last_switch_micros_(std::numeric_limits<int64_t>::min() / 2) {}

bool PrecisionController::WantFast(const LoadSignals& s, std::string* reason) const {
  char buf[160];
  if (policy_.mode == "thresholds") {
    if (s.request_rate_per_s >= static_cast<double>(policy_.fast_at_rate_per_s) &&
        100 * s.memory_used_fraction > static_cast<double>(policy_.fast_at_memory_used_percent)) {
      std::snprintf(buf, sizeof(buf), "rate %.0f/s >= %lld and memory use %.0f%% > %lld%%",
                    s.request_rate_per_s, static_cast<long long>(policy_.fast_at_rate_per_s),
                    100 * s.memory_used_fraction,
                    static_cast<long long>(policy_.fast_at_memory_used_percent));
      *reason = buf;
      return true;
    }
    return false;
  }
  if (policy_.mode == "prefill") {
    if (s.window_tokens >= policy_.min_window_tokens && s.window_tokens > 0 &&
        100 * s.prefill_share >= static_cast<double>(policy_.degrade_at_prefill_percent)) {
      std::snprintf(buf, sizeof(buf), "prompt tokens %.0f%% of %lld run >= %lld%%",
                    100 * s.prefill_share, static_cast<long long>(s.window_tokens),
                    static_cast<long long>(policy_.degrade_at_prefill_percent));
      *reason = buf;
      return true;
    }
    return false;
  }
  if (s.samples >= policy_.min_samples &&
      100 * s.p99_micros >= policy_.degrade_at_slo_percent * policy_.slo_p99_micros) {
    std::snprintf(buf, sizeof(buf), "p99 %.1f ms >= %lld%% of the %.0f ms SLO", s.p99_micros / 1e3,
                  static_cast<long long>(policy_.degrade_at_slo_percent),
                  policy_.slo_p99_micros / 1e3);
    *reason = buf;
    return true;
  }
  if (100 * s.utilization >= static_cast<double>(policy_.degrade_at_utilization_percent)) {
    std::snprintf(buf, sizeof(buf), "inference worker %.0f%% busy >= %lld%%", 100 * s.utilization,
                  static_cast<long long>(policy_.degrade_at_utilization_percent));
    *reason = buf;
    return true;
  }
  return false;
}

bool PrecisionController::WantAccurate(const LoadSignals& s, std::string* reason) const {
  char buf[200];
  if (policy_.mode == "thresholds") {
    if (s.request_rate_per_s <= static_cast<double>(policy_.accurate_at_rate_per_s) &&
        s.memory_free_bytes >= policy_.accurate_at_memory_free_bytes) {
      std::snprintf(buf, sizeof(buf), "rate %.0f/s <= %lld and %.1f GB free", s.request_rate_per_s,
                    static_cast<long long>(policy_.accurate_at_rate_per_s),
                    s.memory_free_bytes / 1e9);
      *reason = buf;
      return true;
    }
    return false;
  }
  if (policy_.mode == "prefill") {
    if (s.window_tokens == 0) {
      *reason = "idle: no tokens run in the window";
      return true;
    }
    if (100 * s.prefill_share <= static_cast<double>(policy_.restore_below_prefill_percent)) {
      std::snprintf(buf, sizeof(buf), "prompt tokens %.0f%% of %lld run <= %lld%%",
                    100 * s.prefill_share, static_cast<long long>(s.window_tokens),
                    static_cast<long long>(policy_.restore_below_prefill_percent));
      *reason = buf;
      return true;
    }
    return false;
  }
  if (s.reference_rows_owed > 0) return false;
  // Predict the accurate variant's load from the fast one's: service time scales by the
  // measured slowdown; so does utilisation, and the latency at least as much.
  const double slowdown = std::max(1.0, s.accurate_slowdown);
  const double predicted_utilization = s.utilization * slowdown;
  const double predicted_p99 = static_cast<double>(s.p99_micros) * slowdown;
  if (100 * predicted_utilization <= static_cast<double>(policy_.restore_below_utilization_percent) &&
      (s.samples == 0 || 100 * predicted_p99 <= static_cast<double>(policy_.restore_below_slo_percent *
                                                                    policy_.slo_p99_micros))) {
    std::snprintf(buf, sizeof(buf),
                  "headroom: predicted %.0f%% busy and p99 %.1f ms on the accurate variant "
                  "(%.2fx slower)",
                  100 * predicted_utilization, predicted_p99 / 1e3, slowdown);
    *reason = buf;
    return true;
  }
  return false;
}

bool PrecisionController::Update(const LoadSignals& s) {
  if (policy_.mode == "off") {
    const bool changed = on_fast_;
    on_fast_ = false;
    return changed;
  }
  const int64_t now = clock_.NowMicros();
  if (now - last_switch_micros_ < policy_.min_dwell_micros) return false;
  std::string reason;
  const bool flip = on_fast_ ? WantAccurate(s, &reason) : WantFast(s, &reason);
  if (!flip) return false;
  on_fast_ = !on_fast_;
  last_switch_micros_ = now;
  ++switches_;
  last_reason_ = reason;
  return true;
}

bool ReadSystemMemory(double* used_fraction, int64_t* available_bytes) {
  std::ifstream in("/proc/meminfo");
  if (!in) return false;
  std::string line;
  int64_t total_kb = 0, available_kb = -1;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string key;
    int64_t kb = 0;
    fields >> key >> kb;
    if (key == "MemTotal:") total_kb = kb;
    if (key == "MemAvailable:") available_kb = kb;
  }
  if (total_kb <= 0 || available_kb < 0) return false;
  *available_bytes = available_kb * 1024;
  *used_fraction = 1.0 - static_cast<double>(available_kb) / static_cast<double>(total_kb);
  return true;
}

}  // namespace tailcut
