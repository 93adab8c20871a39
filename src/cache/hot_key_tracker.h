// HotKeyTracker: per-key request counts in time buckets, and a forecast of which keys will
// be hot in the next bucket. It drives predictive warm-up: entries of keys forecast to stay
// hot are refreshed before their TTL runs out, so the next request of a hot key does not pay
// for a model run just because its entry aged.
//
// Forecaster: Holt's linear (double exponential) smoothing over each key's bucket series,
// which follows rising and fading popularity with one level and one trend per key. The
// source article trains an LSTM over windows of 64 steps; a learned model is only worth its
// cost if it beats this on the same trace (see bench/warmup_sim.cc), and it has not been
// needed.
//
// Memory is bounded: at most max_tracked_keys keys are kept. When a shard is full, the
// eighth of its keys with the lowest smoothed level (+ current count) is forgotten in one
// pass, so the O(shard) scan is paid once per shard/8 new keys: amortised O(1) per Record()
// however many one-off keys arrive (evicting one key per new key cost a scan each). Each key
// keeps what is needed to recompute its entry (token ids, variant, normalisation), so
// warm-up never needs the original text.
//
// Thread-safety: Record() and PredictHot() are safe from any thread (sharded locks).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cache/cache_key.h"
#include "common/clock.h"

namespace tailcut {

struct HotKeyTrackerOptions {
  // Width of one counting bucket: the forecasting step. Warm-up acts once per bucket.
  int64_t bucket_micros = 10'000'000;
  // Keys tracked at most (about 200 bytes each plus their token ids).
  size_t max_tracked_keys = 20'000;
  // Holt's smoothing factors: alpha weights the newest count in the level, beta the newest
  // change in the trend. Higher = faster reaction, noisier forecasts.
  double alpha = 0.5;
  double beta = 0.3;
};

class HotKeyTracker {
 public:
  struct Prediction {
    CacheKey key;
    double forecast;  // Requests expected in the next bucket.
    std::vector<int64_t> ids;
    int variant;
    bool normalize;
  };

  HotKeyTracker(const HotKeyTrackerOptions& options, const Clock& clock);

  // One request for `key`; the other fields are what recomputing it needs.
  void Record(const CacheKey& key, std::span<const int64_t> ids, int variant, bool normalize);
  // Keys forecast to get at least `min_forecast` requests in the next bucket, hottest first,
  // at most `limit`.
  std::vector<Prediction> PredictHot(size_t limit, double min_forecast);
  size_t tracked() const;
  // Keys examined by eviction so far, over all shards: the work Record() spends keeping
  // memory bounded (about 8 x + the keys evicted; for tests and benchmarks).
  uint64_t eviction_scanned() const;

 private:
  struct Series {
    int64_t bucket = 0;  // The bucket `count` belongs to.
    uint32_t count = 0;
    double level = 0;
    double trend = 0;
    bool started = false;
    std::vector<int64_t> ids;
    int variant = 0;
    bool normalize = true;
  };
  struct Shard {
    std::mutex mutex;
    std::unordered_map<CacheKey, Series, CacheKeyHash> keys;
    uint64_t eviction_scanned = 0;
    // Reused by EvictColdest so eviction does not allocate each time.
    std::vector<std::pair<double, CacheKey>> scratch;
  };
  // Folds completed buckets up to `bucket` into the series' level and trend.
  void Advance(Series& s, int64_t bucket) const;
  // Forgets the coldest eighth of a full shard (at least one key).
  void EvictColdest(Shard& shard, int64_t bucket);

  static constexpr size_t kShards = 8;
  const HotKeyTrackerOptions options_;
  const Clock& clock_;
  std::unique_ptr<Shard[]> shards_;
};

}  // namespace tailcut
