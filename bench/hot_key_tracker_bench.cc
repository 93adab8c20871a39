// Micro-benchmarks of HotKeyTracker::Record (src/cache/hot_key_tracker.h), which every
// cacheable request calls, at the default bound of 20k tracked keys:
//   BM_RecordNewKey   a key not tracked yet, into a full tracker: the cost of eviction, paid
//                     by every request of a never-seen text once the table is full.
//   BM_RecordTracked  a key already tracked (lookup and count), for comparison.
// Keys are uniformly random 128-bit digests, as production makes them; time is simulated
// (ManualClock) and advances one bucket every 50k records so levels move.
//
//   build/bench/hot_key_tracker_bench --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true      (one command line)
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "cache/hot_key_tracker.h"

namespace {

using tailcut::CacheKey;
using tailcut::HotKeyTracker;
using tailcut::HotKeyTrackerOptions;
using tailcut::ManualClock;

constexpr int64_t kBucketMicros = 10'000'000;
constexpr int64_t kIds[] = {101, 2054, 102};

// A tracker 90% full (the shards are a little uneven, so none is full yet), with a few
// buckets of history so keys have levels to compare. BM_RecordNewKey fills the rest within
// its first few thousand iterations.
struct Prefilled {
  ManualClock clock{100 * kBucketMicros};
  HotKeyTrackerOptions options;
  HotKeyTracker tracker{options, clock};
  std::mt19937_64 rng{7};
  std::vector<CacheKey> tracked;

  Prefilled() {
    for (size_t i = 0; i < options.max_tracked_keys * 9 / 10; ++i) {
      tracked.push_back(CacheKey{rng(), rng()});
    }
    for (int bucket = 0; bucket < 4; ++bucket) {
      for (const CacheKey& k : tracked) {
        // A spread of popularity: 1 to 8 requests per bucket.
        for (uint64_t n = 0; n <= k.low % 8; ++n) tracker.Record(k, kIds, 0, true);
      }
      clock.AdvanceMicros(kBucketMicros);
    }
  }
};

void BM_RecordNewKey(benchmark::State& state) {
  Prefilled full;
  int64_t n = 0;
  for (auto _ : state) {
    full.tracker.Record(CacheKey{full.rng(), full.rng()}, kIds, 0, true);
    if (++n % 50'000 == 0) full.clock.AdvanceMicros(kBucketMicros);
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["tracked"] = static_cast<double>(full.tracker.tracked());
}
BENCHMARK(BM_RecordNewKey);

void BM_RecordTracked(benchmark::State& state) {
  Prefilled full;
  size_t i = 0;
  for (auto _ : state) {
    full.tracker.Record(full.tracked[i], kIds, 0, true);
    i = (i + 7919) % full.tracked.size();
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RecordTracked);

}  // namespace

BENCHMARK_MAIN();
