#include "cache/l1_cache.h"

#include <gtest/gtest.h>
#include <malloc.h>

#include <atomic>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace tailcut {
namespace {

constexpr size_t kDim = 384;  // all-MiniLM-L6-v2's output: 1.5 KB per vector.

CacheKey Key(uint64_t i) {
  return CacheKey{0x5eed, i};
}

// A vector whose contents identify the key, so a hit can be checked for the right data.
std::vector<float> Value(uint64_t i, size_t floats = kDim) {
  std::vector<float> v(floats);
  for (size_t j = 0; j < floats; ++j) v[j] = static_cast<float>(i) + static_cast<float>(j) * 1e-3f;
  return v;
}

L1CacheOptions Options(size_t entries, int shards = 1, bool admission = true) {
  L1CacheOptions o;
  o.capacity_bytes = entries * L1Cache::ChargeBytes(kDim);
  o.shards = shards;
  o.admission_filter = admission;
  o.ttl_micros = 0;
  return o;
}

TEST(L1CacheTest, HitMissAndExactCopy) {
  ManualClock clock;
  L1Cache cache(Options(100), clock, nullptr);
  std::vector<float> out;
  EXPECT_FALSE(cache.Lookup(Key(1), &out));
  ASSERT_TRUE(cache.Insert(Key(1), 7, Value(1)));
  ASSERT_TRUE(cache.Lookup(Key(1), &out));
  EXPECT_EQ(out, Value(1));
  EXPECT_FALSE(cache.Lookup(Key(2), &out));
  EXPECT_EQ(out, Value(1)) << "a miss leaves *out alone";
  EXPECT_TRUE(cache.Contains(Key(1)));
  EXPECT_FALSE(cache.Contains(Key(2)));

  // Empty values are valid entries.
  ASSERT_TRUE(cache.Insert(Key(3), 7, {}));
  ASSERT_TRUE(cache.Lookup(Key(3), &out));
  EXPECT_TRUE(out.empty());

  const L1Cache::Stats s = cache.stats();
  EXPECT_EQ(s.hits, 2u);
  EXPECT_EQ(s.misses, 2u);
  EXPECT_EQ(s.inserts, 2u);
  EXPECT_EQ(s.entries, 2u);
  EXPECT_EQ(s.bytes, L1Cache::ChargeBytes(kDim) + L1Cache::ChargeBytes(0));
}

TEST(L1CacheTest, LookupAgainCountsAHitButNotASecondMiss) {
  ManualClock clock;
  L1Cache cache(Options(100), clock, nullptr);
  std::vector<float> out;
  EXPECT_FALSE(cache.Lookup(Key(1), &out));
  EXPECT_FALSE(cache.LookupAgain(Key(1), &out));
  EXPECT_EQ(cache.stats().misses, 1u);
  ASSERT_TRUE(cache.Insert(Key(1), 7, Value(1)));
  ASSERT_TRUE(cache.LookupAgain(Key(1), &out));
  EXPECT_EQ(out, Value(1));
  EXPECT_EQ(cache.stats().hits, 1u);
  EXPECT_EQ(cache.stats().misses, 1u);
}

TEST(L1CacheTest, OverwriteReplacesValueAndCharge) {
  ManualClock clock;
  for (bool admission : {true, false}) {
    L1Cache cache(Options(100, 1, admission), clock, nullptr);
    ASSERT_TRUE(cache.Insert(Key(1), 1, Value(1)));
    ASSERT_TRUE(cache.Insert(Key(1), 1, Value(2)));  // Same size.
    std::vector<float> out;
    ASSERT_TRUE(cache.Lookup(Key(1), &out));
    EXPECT_EQ(out, Value(2));
    ASSERT_TRUE(cache.Insert(Key(1), 2, Value(3, 10)));  // Different size and tag.
    ASSERT_TRUE(cache.Lookup(Key(1), &out));
    EXPECT_EQ(out, Value(3, 10));
    const L1Cache::Stats s = cache.stats();
    EXPECT_EQ(s.entries, 1u);
    EXPECT_EQ(s.inserts, 3u);
    EXPECT_EQ(s.bytes, L1Cache::ChargeBytes(10));
    EXPECT_EQ(cache.EraseTag(1), 0u) << "the overwrite re-tagged the entry";
    EXPECT_EQ(cache.EraseTag(2), 1u);
  }
}

TEST(L1CacheTest, TtlExpiresWithManualClock) {
  ManualClock clock;
  L1CacheOptions o = Options(100);
  o.ttl_micros = 1000;
  L1Cache cache(o, clock, nullptr);
  ASSERT_TRUE(cache.Insert(Key(1), 0, Value(1)));
  EXPECT_EQ(cache.RemainingTtlMicros(Key(1)), 1000);
  EXPECT_EQ(cache.RemainingTtlMicros(Key(2)), std::nullopt);

  clock.AdvanceMicros(999);
  EXPECT_EQ(cache.RemainingTtlMicros(Key(1)), 1);
  std::vector<float> out;
  EXPECT_TRUE(cache.Lookup(Key(1), &out)) << "a hit does not extend the TTL";
  clock.AdvanceMicros(1);
  EXPECT_FALSE(cache.Contains(Key(1)));
  EXPECT_EQ(cache.RemainingTtlMicros(Key(1)), std::nullopt);
  EXPECT_EQ(cache.stats().entries, 1u) << "Contains/RemainingTtl have no side effects";
  EXPECT_FALSE(cache.Lookup(Key(1), &out));
  L1Cache::Stats s = cache.stats();
  EXPECT_EQ(s.expirations, 1u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.entries, 0u);
  EXPECT_EQ(s.bytes, 0u);

  // An overwrite restarts the TTL.
  ASSERT_TRUE(cache.Insert(Key(2), 0, Value(2)));
  clock.AdvanceMicros(600);
  ASSERT_TRUE(cache.Insert(Key(2), 0, Value(2)));
  clock.AdvanceMicros(600);
  EXPECT_TRUE(cache.Contains(Key(2)));
  EXPECT_EQ(cache.RemainingTtlMicros(Key(2)), 400);
}

TEST(L1CacheTest, ZeroTtlNeverExpires) {
  ManualClock clock;
  L1Cache cache(Options(10), clock, nullptr);
  ASSERT_TRUE(cache.Insert(Key(1), 0, Value(1)));
  clock.AdvanceMicros(int64_t{1} << 60);
  EXPECT_TRUE(cache.Contains(Key(1)));
  EXPECT_EQ(cache.RemainingTtlMicros(Key(1)), std::numeric_limits<int64_t>::max());
}

TEST(L1CacheTest, InsertDropsExpiredEntriesFromTheHead) {
  ManualClock clock;
  L1CacheOptions o = Options(1000);
  o.ttl_micros = 100;
  L1Cache cache(o, clock, nullptr);
  for (uint64_t i = 0; i < 20; ++i) ASSERT_TRUE(cache.Insert(Key(i), 0, Value(i)));
  clock.AdvanceMicros(100);
  // No lookup touches the old keys; inserts alone reclaim their memory, a bounded number
  // (16) per call.
  ASSERT_TRUE(cache.Insert(Key(100), 0, Value(100)));
  EXPECT_EQ(cache.stats().expirations, 16u);
  ASSERT_TRUE(cache.Insert(Key(101), 0, Value(101)));
  const L1Cache::Stats s = cache.stats();
  EXPECT_EQ(s.expirations, 20u);
  EXPECT_EQ(s.entries, 2u);
  EXPECT_EQ(s.bytes, 2 * L1Cache::ChargeBytes(kDim));
}

TEST(L1CacheTest, OversizedValueIsRefused) {
  ManualClock clock;
  L1Cache cache(Options(4, /*shards=*/2), clock, nullptr);  // 2 entries per shard.
  EXPECT_FALSE(cache.Insert(Key(1), 0, Value(1, 3 * kDim)));
  EXPECT_FALSE(cache.Contains(Key(1)));
  EXPECT_EQ(cache.stats().rejected_by_admission, 1u);
  EXPECT_EQ(cache.stats().bytes, 0u);
}

// Property: under random sizes, keys, overwrites, TTLs and flushes, the charged bytes never
// exceed the cap and always equal the sum of the charges of the resident entries.
TEST(L1CacheTest, ByteCapacityIsNeverExceeded) {
  std::mt19937_64 rng(42);
  for (int round = 0; round < 12; ++round) {
    ManualClock clock;
    L1CacheOptions o;
    o.admission_filter = round % 2 == 0;
    o.shards = round % 3 == 1 ? 1 : 1 + static_cast<int>(rng() % 8);
    o.capacity_bytes = 20'000 + rng() % 400'000;
    o.window_fraction = (round % 3) * 0.1;  // 0, 0.1, 0.2
    o.ttl_micros = round % 4 == 0 ? 5'000 : 0;
    L1Cache cache(o, clock, nullptr);
    std::map<uint64_t, size_t> last_size;  // Size of each key's last stored value.
    std::vector<float> out;
    for (int op = 0; op < 4000; ++op) {
      const uint64_t k = rng() % 600;
      const uint64_t action = rng() % 100;
      if (action < 55) {
        const size_t floats = rng() % 2000;
        const L1Cache::Stats before = cache.stats();
        if (cache.Insert(Key(k), static_cast<uint32_t>(k % 3), Value(k, floats))) {
          last_size[k] = floats;
        }
        const L1Cache::Stats after = cache.stats();
        // Eviction stops as soon as the value fits: with one shard, an insert that removed
        // anything for space leaves the cache less than one largest entry short of full.
        if (o.shards == 1 && (after.evictions > before.evictions ||
                              after.rejected_by_admission > before.rejected_by_admission)) {
          ASSERT_GT(after.bytes + L1Cache::ChargeBytes(2000), o.capacity_bytes)
              << "round " << round << " op " << op;
        }
      } else if (action < 97) {
        if (cache.Lookup(Key(k), &out)) {
          ASSERT_EQ(out, Value(k, last_size.at(k)));
        }
      } else if (action < 99) {
        cache.EraseTag(static_cast<uint32_t>(k % 3));
      } else {
        clock.AdvanceMicros(1'000);
      }
      const L1Cache::Stats s = cache.stats();
      ASSERT_LE(s.bytes, o.capacity_bytes) << "round " << round << " op " << op;
      if (op % 200 == 0) {
        size_t expected_bytes = 0;
        size_t expected_entries = 0;
        for (const auto& [key, floats] : last_size) {
          if (!cache.Contains(Key(key))) continue;
          expected_bytes += L1Cache::ChargeBytes(floats);
          ++expected_entries;
        }
        // Expired-but-unreclaimed entries still hold memory and count in bytes.
        if (o.ttl_micros == 0) {
          ASSERT_EQ(s.bytes, expected_bytes);
          ASSERT_EQ(s.entries, expected_entries);
        }
      }
    }
  }
}

TEST(L1CacheTest, EraseTagFlushesOneModel) {
  ManualClock clock;
  MetricsRegistry registry;
  L1Cache cache(Options(1000, 4), clock, &registry);
  for (uint64_t i = 0; i < 90; ++i) ASSERT_TRUE(cache.Insert(Key(i), i % 3, Value(i, 8)));
  EXPECT_EQ(cache.EraseTag(1), 30u);
  EXPECT_EQ(cache.EraseTag(1), 0u);
  for (uint64_t i = 0; i < 90; ++i) EXPECT_EQ(cache.Contains(Key(i)), i % 3 != 1) << i;
  L1Cache::Stats s = cache.stats();
  EXPECT_EQ(s.flushed, 30u);
  EXPECT_EQ(s.entries, 60u);
  EXPECT_EQ(s.bytes, 60 * L1Cache::ChargeBytes(8));

  cache.Clear();
  s = cache.stats();
  EXPECT_EQ(s.flushed, 90u);
  EXPECT_EQ(s.entries, 0u);
  EXPECT_EQ(s.bytes, 0u);
  EXPECT_NE(
      registry.Serialize().find("tailcut_cache_evictions_total{tier=\"l1\",reason=\"flush\"} 90"),
      std::string::npos);
}

TEST(L1CacheTest, ContainsDoesNotRefreshRecencyButLookupDoes) {
  ManualClock clock;
  for (bool probe_with_lookup : {false, true}) {
    // Plain SLRU with room for 3: the least recent probation entry is the victim.
    L1Cache cache(Options(3, 1, /*admission=*/false), clock, nullptr);
    for (uint64_t i = 1; i <= 3; ++i) ASSERT_TRUE(cache.Insert(Key(i), 0, Value(i)));
    if (probe_with_lookup) {
      std::vector<float> out;
      ASSERT_TRUE(cache.Lookup(Key(1), &out));
    } else {
      ASSERT_TRUE(cache.Contains(Key(1)));
    }
    ASSERT_TRUE(cache.Insert(Key(4), 0, Value(4)));
    EXPECT_EQ(cache.Contains(Key(1)), probe_with_lookup);
    EXPECT_EQ(cache.Contains(Key(2)), !probe_with_lookup);
  }
}

// The reason for W-TinyLFU. A small hot set is requested once per round; between rounds a
// scan of unique keys (one-hit wonders) larger than the cache passes through. Each request
// is a lookup followed by an insert on a miss, as the server does.
//  - W-TinyLFU: scan keys (frequency 1) lose every duel against the hot keys, which stay.
//  - Plain SLRU: a hot key enters probation and is pushed out by the scan before its next
//    request, so it never reaches protected and the hot set misses every round.
class ScanResistanceTest : public ::testing::TestWithParam<int> {};

TEST_P(ScanResistanceTest, HotSetSurvivesScanOnlyWithAdmissionFilter) {
  const int shards = GetParam();
  constexpr uint64_t kHot = 20;
  constexpr int kRounds = 40;
  const uint64_t capacity_entries = 100 * static_cast<uint64_t>(shards);
  const uint64_t scan_per_round = 2 * capacity_entries;
  for (bool admission : {true, false}) {
    ManualClock clock;
    L1Cache cache(Options(capacity_entries, shards, admission), clock, nullptr);
    std::vector<float> out;
    uint64_t hot_hits = 0;
    uint64_t hot_requests = 0;
    uint64_t scan_key = 1'000'000;
    for (int round = 0; round < kRounds; ++round) {
      for (uint64_t h = 0; h < kHot * static_cast<uint64_t>(shards); ++h) {
        const bool hit = cache.Lookup(Key(h), &out);
        if (!hit) cache.Insert(Key(h), 0, Value(h));
        if (round > 0) {
          ++hot_requests;
          hot_hits += hit ? 1 : 0;
        }
      }
      for (uint64_t i = 0; i < scan_per_round; ++i, ++scan_key) {
        ASSERT_FALSE(cache.Lookup(Key(scan_key), &out));
        cache.Insert(Key(scan_key), 0, Value(scan_key));
      }
    }
    uint64_t hot_resident = 0;
    for (uint64_t h = 0; h < kHot * static_cast<uint64_t>(shards); ++h) {
      hot_resident += cache.Contains(Key(h)) ? 1 : 0;
    }
    const double hot_hit_rate = static_cast<double>(hot_hits) / static_cast<double>(hot_requests);
    const L1Cache::Stats s = cache.stats();
    EXPECT_LE(s.bytes, capacity_entries * L1Cache::ChargeBytes(kDim));
    if (admission) {
      EXPECT_GE(hot_hit_rate, 0.95) << "shards=" << shards;
      EXPECT_GE(hot_resident, kHot * static_cast<uint64_t>(shards) * 95 / 100);
      EXPECT_GT(s.rejected_by_admission, 0u);
    } else {
      EXPECT_LE(hot_hit_rate, 0.05) << "shards=" << shards;
      EXPECT_EQ(hot_resident, 0u);
      EXPECT_EQ(s.rejected_by_admission, 0u);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shards, ScanResistanceTest, ::testing::Values(1, 4));

// A sustained shift in popularity must still get in: frequency is aged, and new hot keys
// overtake the old ones' decaying counts.
TEST(L1CacheTest, AdmissionFollowsAPopularityShift) {
  ManualClock clock;
  L1Cache cache(Options(100), clock, nullptr);
  std::vector<float> out;
  auto request = [&](uint64_t k) {
    if (!cache.Lookup(Key(k), &out)) cache.Insert(Key(k), 0, Value(k));
  };
  for (int r = 0; r < 50; ++r) {
    for (uint64_t k = 0; k < 90; ++k) request(k);  // Old hot set fills the cache.
  }
  for (int r = 0; r < 50; ++r) {
    for (uint64_t k = 500; k < 590; ++k) request(k);  // New hot set, same size.
  }
  uint64_t new_resident = 0;
  for (uint64_t k = 500; k < 590; ++k) new_resident += cache.Contains(Key(k)) ? 1 : 0;
  EXPECT_GE(new_resident, 85u);
}

// Every Insert of a new key ends in exactly one place: still resident, or evicted, expired,
// flushed or rejected. Lookups are hits or misses.
TEST(L1CacheTest, StatsAreConsistent) {
  for (bool admission : {true, false}) {
    ManualClock clock;
    L1CacheOptions o = Options(200, 4, admission);
    o.ttl_micros = 10'000;
    L1Cache cache(o, clock, nullptr);
    std::mt19937_64 rng(3);
    std::vector<float> out;
    uint64_t calls = 0;
    uint64_t stored = 0;
    uint64_t refused = 0;
    uint64_t lookups = 0;
    uint64_t next_key = 0;
    for (int op = 0; op < 20'000; ++op) {
      const uint64_t action = rng() % 100;
      if (action < 40) {
        ++calls;
        const bool ok = cache.Insert(Key(next_key), next_key % 4, Value(next_key, kDim));
        ++next_key;
        (ok ? stored : refused)++;
      } else if (action < 98) {
        ++lookups;
        // Zipf-ish: mostly recent and small keys.
        const uint64_t k = next_key == 0 ? 0 : (rng() % 2 ? rng() % 64 : rng() % next_key);
        cache.Lookup(Key(k), &out);
      } else if (action < 99) {
        cache.EraseTag(static_cast<uint32_t>(rng() % 4));
      } else {
        clock.AdvanceMicros(1'000);
      }
    }
    const L1Cache::Stats s = cache.stats();
    EXPECT_EQ(s.hits + s.misses, lookups);
    EXPECT_EQ(s.inserts, stored);
    EXPECT_GE(s.rejected_by_admission, refused);
    EXPECT_EQ(s.entries + s.evictions + s.expirations + s.flushed + s.rejected_by_admission, calls);
    EXPECT_EQ(s.bytes, s.entries * L1Cache::ChargeBytes(kDim));
    EXPECT_GT(s.hits, 0u);
    EXPECT_GT(s.evictions, 0u);
    EXPECT_GT(s.expirations, 0u);
    EXPECT_GT(s.flushed, 0u);
  }
}

TEST(L1CacheTest, PublishesMetricsAtScrape) {
  ManualClock clock;
  MetricsRegistry registry;
  {
    L1CacheOptions o = Options(2, 1, /*admission=*/false);
    o.ttl_micros = 100;
    L1Cache cache(o, clock, &registry);
    std::vector<float> out;
    cache.Insert(Key(1), 0, Value(1));
    cache.Lookup(Key(1), &out);
    cache.Lookup(Key(2), &out);
    cache.Lookup(Key(3), &out);
    cache.Insert(Key(2), 0, Value(2));
    cache.Insert(Key(3), 0, Value(3));            // Key 1 was promoted to protected; evicts 2.
    cache.Insert(Key(4), 0, Value(4, 5 * kDim));  // Refused: larger than the cache.
    std::string text = registry.Serialize();
    auto has = [&](const std::string& line) { return text.find(line + "\n") != std::string::npos; };
    EXPECT_TRUE(has("tailcut_cache_lookups_total{tier=\"l1\",result=\"hit\"} 1")) << text;
    EXPECT_TRUE(has("tailcut_cache_lookups_total{tier=\"l1\",result=\"miss\"} 2")) << text;
    EXPECT_TRUE(has("tailcut_cache_evictions_total{tier=\"l1\",reason=\"capacity\"} 1")) << text;
    EXPECT_TRUE(has("tailcut_cache_admission_rejected_total{tier=\"l1\"} 1")) << text;
    EXPECT_TRUE(has("tailcut_cache_entries{tier=\"l1\"} 2")) << text;
    EXPECT_TRUE(
        has("tailcut_cache_bytes{tier=\"l1\"} " + std::to_string(2 * L1Cache::ChargeBytes(kDim))))
        << text;

    clock.AdvanceMicros(100);
    cache.Lookup(Key(1), &out);
    text = registry.Serialize();
    EXPECT_TRUE(has("tailcut_cache_evictions_total{tier=\"l1\",reason=\"expired\"} 1")) << text;
    EXPECT_TRUE(has("tailcut_cache_lookups_total{tier=\"l1\",result=\"miss\"} 3")) << text;
  }
  // The cache is gone: the hook detached, counters keep their totals, gauges read 0.
  const std::string text = registry.Serialize();
  EXPECT_NE(text.find("tailcut_cache_lookups_total{tier=\"l1\",result=\"miss\"} 3\n"),
            std::string::npos);
  EXPECT_NE(text.find("tailcut_cache_bytes{tier=\"l1\"} 0\n"), std::string::npos);
}

// GCC defines __SANITIZE_ADDRESS__ / __SANITIZE_THREAD__; clang only answers __has_feature(),
// which GCC 12 lacks (hence the nesting: `defined(f) && f(x)` does not parse there).
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define TAILCUT_CLANG_SANITIZER 1
#endif
#endif
#ifndef TAILCUT_CLANG_SANITIZER
#define TAILCUT_CLANG_SANITIZER 0
#endif

// The charge must describe real memory: with glibc malloc, measure the heap each resident
// entry actually takes and compare.
TEST(L1CacheTest, ChargeMatchesMeasuredHeapUse) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || TAILCUT_CLANG_SANITIZER
  GTEST_SKIP() << "sanitizers replace malloc";
#else
  for (size_t floats : {size_t{0}, size_t{17}, size_t{128}, kDim, size_t{1024}}) {
    ManualClock clock;
    constexpr size_t kEntries = 2000;
    L1CacheOptions o;
    o.shards = 1;
    o.capacity_bytes = 2 * kEntries * L1Cache::ChargeBytes(floats);
    o.expected_value_floats = floats;  // Buckets reserved up front, as in production.
    L1Cache cache(o, clock, nullptr);
    const std::vector<float> value(floats, 1.0f);
    const size_t before = mallinfo2().uordblks;
    for (size_t i = 0; i < kEntries; ++i) ASSERT_TRUE(cache.Insert(Key(i), 0, value));
    const size_t after = mallinfo2().uordblks;
    const double measured = static_cast<double>(after - before) / kEntries;
    const double charged = static_cast<double>(L1Cache::ChargeBytes(floats));
    // Never under-charged. The charge includes a two-pointer share of bucket array that was
    // reserved up front; allocations served from chunks glibc's tcache already counts as in
    // use can make the measurement read a few bytes low, hence the slack below.
    EXPECT_LE(measured, charged) << floats << " floats";
    EXPECT_GE(measured, charged - 32) << floats << " floats";
    std::printf("[ charge   ] %zu floats: charged %.0f B, measured %.1f B per entry\n", floats,
                charged, measured);
  }
#endif
}

// Smoke test for data races (run under TSan): 8 threads of mixed operations on a small key
// space (so hits, overwrites, evictions, expiry and flushes all interleave), a clock moving
// underneath, and metrics being scraped. Every hit must return the data of its own key.
TEST(L1CacheTest, ConcurrentMixedOperations) {
  ManualClock clock;
  MetricsRegistry registry;
  for (bool admission : {true, false}) {
    L1CacheOptions o;
    o.capacity_bytes = 150 * L1Cache::ChargeBytes(64);
    o.shards = 4;
    o.ttl_micros = 2'000;
    o.admission_filter = admission;
    o.expected_value_floats = 64;
    L1Cache cache(o, clock, admission ? &registry : nullptr);
    std::atomic<uint64_t> lookups{0};
    std::atomic<bool> bad_value{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&, t] {
        std::mt19937_64 rng(static_cast<uint64_t>(t) + 1);
        std::vector<float> out;
        uint64_t my_lookups = 0;
        for (int i = 0; i < 20'000; ++i) {
          const uint64_t k = rng() % 400;
          const size_t floats = 16 * (1 + k % 5);  // Sizes vary by key.
          switch (rng() % 16) {
            case 0:
            case 1:
            case 2:
            case 3:
            case 4:
              cache.Insert(Key(k), static_cast<uint32_t>(k % 7), Value(k, floats));
              break;
            case 5:
              cache.Contains(Key(k));
              cache.RemainingTtlMicros(Key(k));
              break;
            case 6:
              if (i % 512 == 0) cache.EraseTag(static_cast<uint32_t>(k % 7));
              if (i % 4096 == 0 && t == 0) cache.Clear();
              if (i % 64 == 0) clock.AdvanceMicros(100);
              if (i % 256 == 0) cache.stats();
              if (i % 1024 == 0 && t == 1) registry.Serialize();
              break;
            default:
              ++my_lookups;
              if (cache.Lookup(Key(k), &out) && out != Value(k, floats)) bad_value = true;
              break;
          }
        }
        lookups += my_lookups;
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_FALSE(bad_value.load());
    const L1Cache::Stats s = cache.stats();
    EXPECT_EQ(s.hits + s.misses, lookups.load());
    EXPECT_LE(s.bytes, o.capacity_bytes);
    EXPECT_GT(s.hits, 0u);
  }
}

}  // namespace
}  // namespace tailcut
