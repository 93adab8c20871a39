// LatencyWindow: recent request latencies and arrival rate over a sliding time window, for
// controllers that react to load (the precision controller's P99 and QPS signals).
//
// The window is a ring of one-second slots, each a log-bucketed histogram (about 4 % bucket
// width from 10 us to ~100 s), so recording is O(1) and a percentile over the window costs a
// pass over a few hundred counters, independent of traffic.
//
// Thread-safety: Record() and the queries are safe from any thread (one mutex; Record()
// holds it for a few instructions).
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <vector>

#include "common/clock.h"

namespace tailcut {

class LatencyWindow {
 public:
  // `window_seconds` slots of one second each.
  LatencyWindow(int window_seconds, const Clock& clock);

  void Record(int64_t latency_micros);
  // The q-quantile (0..1) of latencies recorded in the window, in microseconds; 0 if none.
  int64_t PercentileMicros(double q) const;
  // Requests per second over the window (full seconds only, so a fresh window reads low).
  double RatePerSecond() const;
  int64_t Count() const;

 private:
  static constexpr int kBuckets = 512;
  struct Slot {
    int64_t second = -1;
    int64_t count = 0;
    std::array<uint32_t, kBuckets> buckets{};
  };
  static int BucketOf(int64_t micros);
  static int64_t BucketUpperMicros(int bucket);
  Slot& SlotFor(int64_t second);  // Requires mutex_.

  const Clock& clock_;
  const int window_seconds_;
  mutable std::mutex mutex_;
  std::vector<Slot> slots_;
};

}  // namespace tailcut
