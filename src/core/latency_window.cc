#include "core/latency_window.h"

#include <algorithm>
#include <cmath>

namespace tailcut {
namespace {

// Buckets grow by a factor of kGrowth from 10 us: bucket b covers up to 10 * kGrowth^b us.
constexpr double kGrowth = 1.04;
constexpr double kBaseMicros = 10.0;

}  // namespace

LatencyWindow::LatencyWindow(int window_seconds, const Clock& clock)
    : clock_(clock), window_seconds_(std::max(1, window_seconds)), slots_(window_seconds_ + 1) {}

int LatencyWindow::BucketOf(int64_t micros) {
  if (micros <= kBaseMicros) return 0;
  const int b = static_cast<int>(std::ceil(std::log(micros / kBaseMicros) / std::log(kGrowth)));
  return std::min(b, kBuckets - 1);
}

int64_t LatencyWindow::BucketUpperMicros(int bucket) {
  return static_cast<int64_t>(kBaseMicros * std::pow(kGrowth, bucket));
}

LatencyWindow::Slot& LatencyWindow::SlotFor(int64_t second) {
  Slot& slot = slots_[static_cast<size_t>(second % static_cast<int64_t>(slots_.size()))];
  if (slot.second != second) {
    slot.second = second;
    slot.count = 0;
    slot.buckets.fill(0);
  }
  return slot;
}

void LatencyWindow::Record(int64_t latency_micros) {
  const int64_t second = clock_.NowMicros() / 1'000'000;
  const int bucket = BucketOf(latency_micros);
  std::lock_guard<std::mutex> lock(mutex_);
  Slot& slot = SlotFor(second);
  ++slot.count;
  ++slot.buckets[static_cast<size_t>(bucket)];
}

int64_t LatencyWindow::PercentileMicros(double q) const {
  const int64_t now_second = clock_.NowMicros() / 1'000'000;
  std::array<uint64_t, kBuckets> merged{};
  uint64_t total = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const Slot& s : slots_) {
      if (s.second < 0 || s.second <= now_second - window_seconds_ - 1 || s.second > now_second) {
        continue;
      }
      for (int b = 0; b < kBuckets; ++b) merged[b] += s.buckets[b];
      total += static_cast<uint64_t>(s.count);
    }
  }
  if (total == 0) return 0;
  const uint64_t rank = static_cast<uint64_t>(std::ceil(q * static_cast<double>(total)));
  uint64_t seen = 0;
  for (int b = 0; b < kBuckets; ++b) {
    seen += merged[b];
    if (seen >= std::max<uint64_t>(rank, 1)) return BucketUpperMicros(b);
  }
  return BucketUpperMicros(kBuckets - 1);
}

int64_t LatencyWindow::Count() const {
  const int64_t now_second = clock_.NowMicros() / 1'000'000;
  std::lock_guard<std::mutex> lock(mutex_);
  int64_t total = 0;
  for (const Slot& s : slots_) {
    if (s.second > now_second - window_seconds_ - 1 && s.second <= now_second) total += s.count;
  }
  return total;
}

double LatencyWindow::RatePerSecond() const {
  // Only completed seconds: the current one is still filling.
  const int64_t now_second = clock_.NowMicros() / 1'000'000;
  std::lock_guard<std::mutex> lock(mutex_);
  int64_t total = 0;
  for (const Slot& s : slots_) {
    if (s.second >= now_second - window_seconds_ && s.second < now_second) total += s.count;
  }
  return static_cast<double>(total) / window_seconds_;
}

}  // namespace tailcut
