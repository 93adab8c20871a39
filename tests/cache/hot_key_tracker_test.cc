#include "cache/hot_key_tracker.h"

#include <gtest/gtest.h>

#include <random>

namespace tailcut {
namespace {

constexpr int64_t kBucket = 10'000'000;

class HotKeyTrackerTest : public ::testing::Test {
 protected:
  void Hit(uint64_t k, int times) {
    const int64_t ids[] = {101, static_cast<int64_t>(k), 102};
    for (int i = 0; i < times; ++i) tracker_.Record(CacheKey{k, k}, ids, 0, true);
  }
  ManualClock clock_{100 * kBucket};
  HotKeyTrackerOptions options_;
  HotKeyTracker tracker_{options_, clock_};
};

TEST_F(HotKeyTrackerTest, NothingIsForecastWithoutACompletedBucket) {
  Hit(1, 50);
  EXPECT_TRUE(tracker_.PredictHot(10, 1).empty());
  clock_.AdvanceMicros(kBucket);
  auto hot = tracker_.PredictHot(10, 1);
  ASSERT_EQ(hot.size(), 1u);
  EXPECT_NEAR(hot[0].forecast, 50, 1e-9);
  EXPECT_EQ(hot[0].ids, (std::vector<int64_t>{101, 1, 102}));
}

TEST_F(HotKeyTrackerTest, RisingKeysAreForecastAboveTheirLastCount) {
  for (int b = 1; b <= 5; ++b) {
    Hit(1, 10 * b);  // 10, 20, ... rising.
    Hit(2, 30);      // Steady.
    clock_.AdvanceMicros(kBucket);
  }
  auto hot = tracker_.PredictHot(10, 1);
  ASSERT_EQ(hot.size(), 2u);
  EXPECT_EQ(hot[0].key, (CacheKey{1, 1}));  // Trend pushes it above the steady one.
  EXPECT_GT(hot[0].forecast, 50.0);
  EXPECT_NEAR(hot[1].forecast, 30, 1.0);
}

TEST_F(HotKeyTrackerTest, FadingKeysDropOut) {
  Hit(1, 100);
  clock_.AdvanceMicros(kBucket);
  ASSERT_EQ(tracker_.PredictHot(10, 5).size(), 1u);
  clock_.AdvanceMicros(10 * kBucket);  // Silence.
  EXPECT_TRUE(tracker_.PredictHot(10, 5).empty());
}

TEST_F(HotKeyTrackerTest, LimitKeepsTheHottestAndMemoryIsBounded) {
  options_.max_tracked_keys = 64;
  HotKeyTracker small(options_, clock_);
  const int64_t ids[] = {1};
  for (uint64_t k = 0; k < 1000; ++k) {
    for (uint64_t i = 0; i <= k % 7; ++i) small.Record(CacheKey{k, 0}, ids, 0, true);
  }
  EXPECT_LE(small.tracked(), 64u);
  clock_.AdvanceMicros(kBucket);
  auto hot = small.PredictHot(5, 0);
  EXPECT_EQ(hot.size(), 5u);
  for (size_t i = 1; i < hot.size(); ++i) EXPECT_GE(hot[i - 1].forecast, hot[i].forecast);
}

TEST_F(HotKeyTrackerTest, EvictionWorkPerNewKeyIsBoundedWhateverTheFlood) {
  // 100 keys per shard. A flood of one-off keys (a crawler, unique texts) must cost a bounded
  // amount of eviction work per key, not a scan of the shard each.
  options_.max_tracked_keys = 800;
  HotKeyTracker small(options_, clock_);
  const int64_t ids[] = {1};
  constexpr uint64_t kKeys = 100'000;
  std::mt19937_64 rng(1);  // Random 128-bit digests, as production keys are.
  for (uint64_t k = 0; k < kKeys; ++k) {
    small.Record(CacheKey{rng(), rng()}, ids, 0, true);
    ASSERT_LE(small.tracked(), 800u);
  }
  // Each scan of a full shard (100 keys) frees 12 slots: about 8.3 keys examined per new key.
  EXPECT_LE(small.eviction_scanned(), 9 * kKeys) << small.eviction_scanned();
  EXPECT_GE(small.tracked(), 700u);  // Evicting in batches leaves the table mostly full.
}

TEST_F(HotKeyTrackerTest, HotKeysSurviveAFloodOfOneOffKeys) {
  options_.max_tracked_keys = 800;
  HotKeyTracker small(options_, clock_);
  const int64_t ids[] = {1};
  for (int b = 0; b < 3; ++b) {
    for (uint64_t k = 0; k < 40; ++k) {
      for (int i = 0; i < 20; ++i) small.Record(CacheKey{k, k}, ids, 0, true);
    }
    clock_.AdvanceMicros(kBucket);
  }
  for (uint64_t k = 1000; k < 21'000; ++k) small.Record(CacheKey{k, k * 31}, ids, 0, true);
  clock_.AdvanceMicros(kBucket);
  auto hot = small.PredictHot(100, 5);
  ASSERT_EQ(hot.size(), 40u);
  for (const auto& p : hot) EXPECT_LT(p.key.high, 40u);
}

}  // namespace
}  // namespace tailcut
