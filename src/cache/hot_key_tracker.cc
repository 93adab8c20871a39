#include "cache/hot_key_tracker.h"

#include <algorithm>
#include <cmath>

namespace tailcut {

HotKeyTracker::HotKeyTracker(const HotKeyTrackerOptions& options, const Clock& clock)
    : options_(options), clock_(clock), shards_(new Shard[kShards]) {}

void HotKeyTracker::Advance(Series& s, int64_t bucket) const {
  // Each completed bucket is one observation; empty buckets in between are zeros. A long
  // silence decays the level geometrically, so after ~64 buckets it is as good as zero.
  int64_t steps = std::min<int64_t>(bucket - s.bucket, 64);
  double observed = s.count;
  while (steps-- > 0) {
    if (!s.started) {
      s.level = observed;
      s.trend = 0;
      s.started = true;
    } else {
      const double previous = s.level;
      s.level = options_.alpha * observed + (1 - options_.alpha) * (s.level + s.trend);
      s.trend = options_.beta * (s.level - previous) + (1 - options_.beta) * s.trend;
    }
    observed = 0;
  }
  s.bucket = bucket;
  s.count = 0;
}

void HotKeyTracker::EvictColdest(Shard& shard) {
  // O(shard size), but only when a shard is full, and a shard is 1/kShards of the table.
  auto coldest = shard.keys.end();
  double lowest = 0;
  for (auto it = shard.keys.begin(); it != shard.keys.end(); ++it) {
    const double heat = it->second.level + it->second.count;
    if (coldest == shard.keys.end() || heat < lowest) {
      coldest = it;
      lowest = heat;
    }
  }
  if (coldest != shard.keys.end()) shard.keys.erase(coldest);
}

void HotKeyTracker::Record(const CacheKey& key, std::span<const int64_t> ids, int variant,
                           bool normalize) {
  const int64_t bucket = clock_.NowMicros() / options_.bucket_micros;
  Shard& shard = shards_[CacheKeyHash{}(key) % kShards];
  std::lock_guard<std::mutex> lock(shard.mutex);
  auto it = shard.keys.find(key);
  if (it == shard.keys.end()) {
    if (shard.keys.size() >= options_.max_tracked_keys / kShards) EvictColdest(shard);
    Series s;
    s.bucket = bucket;
    s.ids.assign(ids.begin(), ids.end());
    s.variant = variant;
    s.normalize = normalize;
    it = shard.keys.emplace(key, std::move(s)).first;
  }
  Series& s = it->second;
  if (bucket > s.bucket) Advance(s, bucket);
  ++s.count;
}

std::vector<HotKeyTracker::Prediction> HotKeyTracker::PredictHot(size_t limit,
                                                                 double min_forecast) {
  const int64_t bucket = clock_.NowMicros() / options_.bucket_micros;
  std::vector<Prediction> out;
  for (size_t i = 0; i < kShards; ++i) {
    Shard& shard = shards_[i];
    std::lock_guard<std::mutex> lock(shard.mutex);
    for (auto& [key, s] : shard.keys) {
      if (bucket > s.bucket) Advance(s, bucket);
      if (!s.started) continue;  // Only one partial bucket seen: no history to forecast from.
      const double forecast = std::max(0.0, s.level + s.trend);
      if (forecast >= min_forecast) out.push_back({key, forecast, s.ids, s.variant, s.normalize});
    }
  }
  std::sort(out.begin(), out.end(),
            [](const Prediction& a, const Prediction& b) { return a.forecast > b.forecast; });
  if (out.size() > limit) out.resize(limit);
  return out;
}

size_t HotKeyTracker::tracked() const {
  size_t n = 0;
  for (size_t i = 0; i < kShards; ++i) {
    std::lock_guard<std::mutex> lock(shards_[i].mutex);
    n += shards_[i].keys.size();
  }
  return n;
}

}  // namespace tailcut
