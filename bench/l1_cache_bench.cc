// Micro-benchmarks of the L1 embedding cache (src/cache/l1_cache.h), values of 384 floats
// (all-MiniLM-L6-v2, 1.5 KB):
//   BM_LookupHit/<admission>/<keys>  Lookup of a resident key (includes the 1.5 KB copy
//                                    out), 1k keys (CPU-cache resident) or 16k (27 MB).
//   BM_LookupMiss/<admission>/<keys> Lookup of an absent key.
//   BM_Insert/<admission>            Insert of a new key into a full cache (includes the
//                                    allocation, the copy in, and the eviction/admission
//                                    duel).
// each single-threaded and with 2 threads. With threads, Time is wall time per operation of
// one thread (flat = perfect scaling) and items_per_second the aggregate throughput.
//
//   BM_HitRate/<capacity %>/<trace>/<admission>
// replays a synthetic trace as the server would (Lookup, and Insert on a miss) and reports
// hit_pct (all requests) and zipf_hit_pct (the Zipf requests only), for W-TinyLFU
// (admission=1) against plain segmented LRU (admission=0) at the same byte capacity (% of
// the Zipf universe's bytes). 1.5M Zipf(0.99) requests over 200k keys, plus per trace:
//   0  nothing (pure Zipf);
//   1  scan: a burst of 25k unique keys after every 50k Zipf requests (1/3 of requests);
//   2  one-hit wonders: a unique key before each Zipf request with probability 1/2;
//   3  loop: a pass over the same 40k keys after every 50k Zipf requests (a corpus being
//      re-embedded periodically; longer than the cache, so LRU-like policies get nothing).
//
//   build-l1/bench/l1_cache_bench --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true      (one command line)
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "cache/l1_cache.h"

namespace {

using tailcut::CacheKey;
using tailcut::L1Cache;
using tailcut::L1CacheOptions;

constexpr size_t kDim = 384;
constexpr size_t kResidentKeys = 1 << 14;  // 16k x 1.6 KB = 27 MB: beyond L2/L3.
constexpr size_t kHotKeys = 1 << 10;       // 1k x 1.6 KB = 1.6 MB: mostly in CPU caches.

// Keys as production makes them: uniformly random 128-bit digests.
std::vector<CacheKey> RandomKeys(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<CacheKey> keys(n);
  for (auto& k : keys) k = CacheKey{rng(), rng()};
  return keys;
}

const std::vector<float>& Vector() {
  static const std::vector<float> v(kDim, 0.5f);
  return v;
}

// A default-sized cache (256 MiB, 16 shards, 1 h TTL on the system clock) holding `n` entries.
struct Prefilled {
  std::vector<CacheKey> resident;
  std::vector<CacheKey> absent;
  std::unique_ptr<L1Cache> cache;
  Prefilled(bool admission, size_t n) : resident(RandomKeys(n, 1)), absent(RandomKeys(n, 2)) {
    L1CacheOptions o;
    o.admission_filter = admission;
    cache = std::make_unique<L1Cache>(o, tailcut::SystemClock::Get(), nullptr);
    for (const auto& k : resident) cache->Insert(k, 0, Vector());
  }
};

// Args: admission (0|1), resident keys (a power of two).
Prefilled& GetPrefilled(const benchmark::State& state) {
  static Prefilled caches[2][2] = {{{false, kHotKeys}, {false, kResidentKeys}},
                                   {{true, kHotKeys}, {true, kResidentKeys}}};
  return caches[state.range(0) != 0][static_cast<size_t>(state.range(1)) == kResidentKeys];
}

void BM_LookupHit(benchmark::State& state) {
  Prefilled& p = GetPrefilled(state);
  const size_t mask = p.resident.size() - 1;
  std::vector<float> out;
  // Each thread walks the keys with its own offset; the prime stride visits every key in a
  // cache-unfriendly order.
  size_t i = static_cast<size_t>(state.thread_index()) * 4096;
  for (auto _ : state) {
    i = (i + 7919) & mask;
    benchmark::DoNotOptimize(p.cache->Lookup(p.resident[i], &out));
  }
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0 && p.cache->stats().entries != p.resident.size()) {
    state.SkipWithError("prefilled keys were evicted");
  }
}

void BM_LookupMiss(benchmark::State& state) {
  Prefilled& p = GetPrefilled(state);
  const size_t mask = p.absent.size() - 1;
  std::vector<float> out;
  size_t i = static_cast<size_t>(state.thread_index()) * 4096;
  for (auto _ : state) {
    i = (i + 7919) & mask;
    benchmark::DoNotOptimize(p.cache->Lookup(p.absent[i], &out));
  }
  state.SetItemsProcessed(state.iterations());
}

// New keys into a full cache (capacity 16k entries): every insert displaces something (an
// old entry, or a losing admission candidate), so this is the steady-state cost of filling
// after a miss.
void BM_Insert(benchmark::State& state) {
  static std::unique_ptr<L1Cache> cache;
  static std::vector<CacheKey> keys;
  constexpr size_t kKeys = 1 << 18;
  const bool admission = state.range(0) != 0;
  if (state.thread_index() == 0) {
    L1CacheOptions o;
    o.admission_filter = admission;
    o.capacity_bytes = kResidentKeys * L1Cache::ChargeBytes(kDim);
    cache = std::make_unique<L1Cache>(o, tailcut::SystemClock::Get(), nullptr);
    keys = RandomKeys(kKeys, 3);
    for (size_t i = 0; i < 2 * kResidentKeys; ++i) cache->Insert(keys[i], 0, Vector());
  }
  // Google Benchmark starts the timed loops of all threads together, after thread 0's setup.
  size_t i = static_cast<size_t>(state.thread_index()) * (kKeys / 2);
  for (auto _ : state) {
    i = (i + 1) & (kKeys - 1);
    benchmark::DoNotOptimize(cache->Insert(keys[i], 0, Vector()));
  }
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0 && admission) {
    const L1Cache::Stats s = cache->stats();
    state.counters["rejected_pct"] = 100.0 * static_cast<double>(s.rejected_by_admission) /
                                     static_cast<double>(s.inserts + s.rejected_by_admission);
  }
}

// Zipf(s) ranks over [0, n) by inverse CDF.
class Zipf {
 public:
  Zipf(size_t n, double s) : cdf_(n) {
    double sum = 0;
    for (size_t r = 0; r < n; ++r) cdf_[r] = sum += 1.0 / std::pow(static_cast<double>(r + 1), s);
    for (double& c : cdf_) c /= sum;
  }
  size_t operator()(std::mt19937_64& rng) {
    const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
    return static_cast<size_t>(std::lower_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin());
  }

 private:
  std::vector<double> cdf_;
};

enum Trace : int64_t { kZipf = 0, kZipfScan = 1, kZipfOneHit = 2, kZipfLoop = 3 };

void BM_HitRate(benchmark::State& state) {
  constexpr size_t kUniverse = 200'000;
  constexpr size_t kZipfRequests = 1'500'000;
  constexpr size_t kBurstEvery = 50'000;  // Zipf requests between scan bursts / loop passes.
  constexpr size_t kBurst = 25'000;       // Unique keys per scan burst.
  constexpr size_t kLoop = 40'000;        // Keys of the repeated pass (20% of the universe).
  const double capacity_pct = static_cast<double>(state.range(0));
  const auto trace = static_cast<Trace>(state.range(1));
  L1CacheOptions o;
  o.admission_filter = state.range(2) != 0;
  o.ttl_micros = 0;
  o.capacity_bytes = static_cast<size_t>(static_cast<double>(kUniverse) * capacity_pct / 100.0 *
                                         static_cast<double>(L1Cache::ChargeBytes(kDim)));
  static Zipf zipf(kUniverse, 0.99);
  uint64_t hits = 0;
  uint64_t requests = 0;
  uint64_t zipf_hits = 0;
  uint64_t zipf_requests = 0;
  for (auto _ : state) {
    tailcut::ManualClock clock;
    L1Cache cache(o, clock, nullptr);
    std::mt19937_64 rng(11);
    std::vector<float> out;
    uint64_t unique_key = 0;
    auto request = [&](const CacheKey& k) {
      ++requests;
      if (cache.Lookup(k, &out)) {
        ++hits;
        return true;
      }
      cache.Insert(k, 0, Vector());
      return false;
    };
    for (size_t i = 0; i < kZipfRequests; ++i) {
      if (trace == kZipfOneHit && rng() % 2 == 0) request(CacheKey{2, unique_key++});
      ++zipf_requests;
      if (request(CacheKey{1, zipf(rng)})) ++zipf_hits;
      if ((i + 1) % kBurstEvery != 0) continue;
      if (trace == kZipfScan) {
        for (size_t j = 0; j < kBurst; ++j) request(CacheKey{2, unique_key++});
      } else if (trace == kZipfLoop) {
        for (size_t j = 0; j < kLoop; ++j) request(CacheKey{3, j});
      }
    }
  }
  state.counters["hit_pct"] = 100.0 * static_cast<double>(hits) / static_cast<double>(requests);
  state.counters["zipf_hit_pct"] =
      100.0 * static_cast<double>(zipf_hits) / static_cast<double>(zipf_requests);
}

BENCHMARK(BM_LookupHit)
    ->ArgsProduct({{1, 0}, {kHotKeys, kResidentKeys}})
    ->ArgNames({"admission", "keys"})
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime();
BENCHMARK(BM_LookupMiss)
    ->ArgsProduct({{1, 0}, {kResidentKeys}})
    ->ArgNames({"admission", "keys"})
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime();
BENCHMARK(BM_Insert)->ArgName("admission")->Arg(1)->Arg(0)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_HitRate)
    ->ArgsProduct({{1, 5, 10}, {kZipf, kZipfScan, kZipfOneHit, kZipfLoop}, {1, 0}})
    ->ArgNames({"capacity_pct", "trace", "admission"})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
