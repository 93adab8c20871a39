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

void HotKeyTracker::EvictColdest(Shard& shard, int64_t bucket) {
  // One O(shard) pass frees an eighth of the shard, so the next shard/8 new keys insert
  // without a scan. Levels are brought up to `bucket` first: a key silent for a while must
  // look as cold as its forecast, not as hot as when it was last seen.
  const size_t evict = std::max<size_t>(1, shard.keys.size() / 8);
  auto& heats = shard.scratch;
  heats.clear();
  heats.reserve(shard.keys.size());
  for (auto& [key, s] : shard.keys) {
    if (bucket > s.bucket) Advance(s, bucket);
    heats.emplace_back(s.level + s.count, key);
  }
  shard.eviction_scanned += heats.size();
  if (evict < heats.size()) {
    std::nth_element(heats.begin(), heats.begin() + static_cast<std::ptrdiff_t>(evict),
                     heats.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    heats.resize(evict);
  }
  for (const auto& h : heats) shard.keys.erase(h.second);
}

void HotKeyTracker::Record(const CacheKey& key, std::span<const int64_t> ids, int variant,
                           bool normalize) {
  const int64_t bucket = clock_.NowMicros() / options_.bucket_micros;
  Shard& shard = shards_[CacheKeyHash{}(key) % kShards];
  std::lock_guard<std::mutex> lock(shard.mutex);
  auto it = shard.keys.find(key);
  if (it == shard.keys.end()) {
    if (shard.keys.size() >= options_.max_tracked_keys / kShards) EvictColdest(shard, bucket);
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

uint64_t HotKeyTracker::eviction_scanned() const {
  uint64_t n = 0;
  for (size_t i = 0; i < kShards; ++i) {
    std::lock_guard<std::mutex> lock(shards_[i].mutex);
    n += shards_[i].eviction_scanned;
  }
  return n;
}

}  // namespace tailcut
