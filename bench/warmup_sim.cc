// warmup_sim: hit rate of the L1 cache with and without predictive warm-up on a trace whose
// popularity changes over time, replayed against the real L1Cache and HotKeyTracker with a
// simulated clock (no model: a miss or a warm-up refresh counts as one model run).
//
// Trace (deterministic, seeded): 200 requests/s for 30 simulated minutes. 60 % follow a
// Zipf(1.0) law over 5,000 stable keys; 40 % go to "trending" keys: every two minutes 20
// new keys start trending, their popularity ramping up over three minutes and fading over
// five. Entries live 60 s (the source's in-process TTL), so without warm-up a key that stays
// hot still misses once a minute, and a rising key misses until it is cached.
//
// Policies: none; warm-up with the naive forecaster (next bucket = last bucket); warm-up
// with Holt's smoothing (the server's default). Warm-up runs once per 10 s bucket and
// refreshes keys forecast >= 2 requests in the next bucket whose entry expires within 20 s.
//
// Usage: build/bench/warmup_sim   (prints a Markdown table and a JSON line)
#include <cmath>
#include <cstdio>
#include <random>
#include <unordered_set>
#include <vector>

#include "cache/hot_key_tracker.h"
#include "cache/l1_cache.h"

using namespace tailcut;

namespace {

constexpr int64_t kSecond = 1'000'000;
constexpr int kStableKeys = 5000;
constexpr double kRate = 200;
constexpr int64_t kDurationSeconds = 30 * 60;

struct Request {
  int64_t t;
  uint64_t key;
};

std::vector<Request> MakeTrace() {
  std::mt19937_64 rng(42);
  // Zipf(1.0) over the stable keys by inverse CDF.
  std::vector<double> cdf(kStableKeys);
  double sum = 0;
  for (int i = 0; i < kStableKeys; ++i) cdf[i] = (sum += 1.0 / (i + 1));
  for (auto& c : cdf) c /= sum;
  std::uniform_real_distribution<double> u(0, 1);
  std::exponential_distribution<double> gap(kRate);
  std::vector<Request> trace;
  double t = 0;
  while (t < kDurationSeconds) {
    const int64_t now = static_cast<int64_t>(t * kSecond);
    if (u(rng) < 0.6) {
      const int k = static_cast<int>(std::lower_bound(cdf.begin(), cdf.end(), u(rng)) - cdf.begin());
      trace.push_back({now, static_cast<uint64_t>(k)});
    } else {
      // Trending cohorts start every 120 s; weight rises linearly for 180 s, fades for 300 s.
      std::vector<std::pair<uint64_t, double>> live;
      double total = 0;
      for (int cohort = 0; cohort * 120 <= t; ++cohort) {
        const double age = t - cohort * 120;
        double w = age < 180 ? age / 180 : std::max(0.0, 1 - (age - 180) / 300);
        if (w <= 0) continue;
        for (int j = 0; j < 20; ++j) {
          // Within a cohort, a Zipf-ish spread: some trends are bigger than others.
          const double wj = w / (j + 1);
          live.push_back({1'000'000ull + static_cast<uint64_t>(cohort) * 100 + j, wj});
          total += wj;
        }
      }
      if (live.empty()) {
        t += gap(rng);
        continue;
      }
      double pick = u(rng) * total;
      for (const auto& [key, w] : live) {
        if ((pick -= w) <= 0) {
          trace.push_back({now, key});
          break;
        }
      }
    }
    t += gap(rng);
  }
  return trace;
}

struct Outcome {
  const char* policy;
  uint64_t requests = 0, hits = 0, misses = 0, refreshes = 0;
  uint64_t repeat_misses = 0;  // Misses of keys requested before: the ones warm-up can avoid.
};

Outcome Replay(const std::vector<Request>& trace, const char* name, bool warmup, double alpha,
               double beta) {
  ManualClock clock(kSecond);
  L1CacheOptions l1o;
  l1o.capacity_bytes = 512u << 20;  // No capacity pressure: this isolates the TTL effect.
  l1o.ttl_micros = 60 * kSecond;
  L1Cache l1(l1o, clock, nullptr);
  HotKeyTrackerOptions to;
  to.bucket_micros = 10 * kSecond;
  to.alpha = alpha;
  to.beta = beta;
  HotKeyTracker tracker(to, clock);
  const std::vector<float> value(384, 0.5f);
  const int64_t ids[] = {101, 102};
  Outcome o{name};
  std::unordered_set<uint64_t> seen;
  int64_t next_round = to.bucket_micros + to.bucket_micros / 10;
  for (const auto& r : trace) {
    clock.SetMicros(kSecond + r.t);
    while (warmup && kSecond + r.t >= next_round) {
      // One warm-up round, as TextEmbeddingServable::WarmupRound does it.
      for (const auto& p : tracker.PredictHot(256, 2.0)) {
        const auto remaining = l1.RemainingTtlMicros(p.key);
        if (remaining && *remaining > 20 * kSecond) continue;
        l1.Insert(p.key, 1, value);
        ++o.refreshes;
      }
      next_round += to.bucket_micros;
    }
    const CacheKey key{r.key, ~r.key};
    tracker.Record(key, ids, 0, true);
    ++o.requests;
    if (l1.Lookup(key, nullptr)) {
      ++o.hits;
    } else {
      ++o.misses;
      if (seen.count(r.key)) ++o.repeat_misses;
      l1.Insert(key, 1, value);
    }
    seen.insert(r.key);
  }
  return o;
}

}  // namespace

int main() {
  const auto trace = MakeTrace();
  const Outcome runs[] = {Replay(trace, "no warm-up", false, 0, 0),
                          Replay(trace, "warm-up, naive forecast", true, 1.0, 0.0),
                          Replay(trace, "warm-up, Holt forecast", true, 0.5, 0.3)};
  std::printf(
      "| policy | requests | hit rate | misses | misses of keys seen before | warm-up refreshes "
      "| model runs |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|\n");
  for (const auto& o : runs) {
    std::printf("| %s | %llu | %.2f %% | %llu | %llu | %llu | %llu |\n", o.policy,
                static_cast<unsigned long long>(o.requests), 100.0 * o.hits / o.requests,
                static_cast<unsigned long long>(o.misses),
                static_cast<unsigned long long>(o.repeat_misses),
                static_cast<unsigned long long>(o.refreshes),
                static_cast<unsigned long long>(o.misses + o.refreshes));
  }
  std::printf("{\"trace_requests\":%zu", trace.size());
  for (const auto& o : runs) {
    std::printf(",\"%s\":{\"hit_rate\":%.5f,\"misses\":%llu,\"refreshes\":%llu}", o.policy,
                static_cast<double>(o.hits) / o.requests, static_cast<unsigned long long>(o.misses),
                static_cast<unsigned long long>(o.refreshes));
  }
  std::printf("}\n");
  return 0;
}
