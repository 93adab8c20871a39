#include "core/latency_window.h"

#include <gtest/gtest.h>

namespace tailcut {
namespace {

constexpr int64_t kSecond = 1'000'000;

TEST(LatencyWindowTest, PercentilesWithinBucketPrecision) {
  ManualClock clock(50 * kSecond);
  LatencyWindow w(10, clock);
  for (int i = 1; i <= 1000; ++i) w.Record(i * 100);  // 0.1 .. 100 ms
  const int64_t p99 = w.PercentileMicros(0.99);
  EXPECT_NEAR(p99, 99'000, 99'000 * 0.05);
  const int64_t p50 = w.PercentileMicros(0.50);
  EXPECT_NEAR(p50, 50'000, 50'000 * 0.05);
  EXPECT_EQ(w.Count(), 1000);
}

TEST(LatencyWindowTest, OldSecondsLeaveTheWindow) {
  ManualClock clock(50 * kSecond);
  LatencyWindow w(5, clock);
  for (int i = 0; i < 100; ++i) w.Record(200'000);
  clock.AdvanceMicros(3 * kSecond);
  for (int i = 0; i < 100; ++i) w.Record(1'000);
  EXPECT_GT(w.PercentileMicros(0.99), 100'000);
  clock.AdvanceMicros(3 * kSecond);  // The slow second is now 6 s old.
  EXPECT_LT(w.PercentileMicros(0.99), 2'000);
  clock.AdvanceMicros(10 * kSecond);
  EXPECT_EQ(w.PercentileMicros(0.99), 0);
  EXPECT_EQ(w.Count(), 0);
}

TEST(LatencyWindowTest, RateCountsCompletedSecondsOnly) {
  ManualClock clock(50 * kSecond);
  LatencyWindow w(4, clock);
  for (int s = 0; s < 4; ++s) {
    for (int i = 0; i < 25; ++i) w.Record(1000);
    clock.AdvanceMicros(kSecond);
  }
  EXPECT_DOUBLE_EQ(w.RatePerSecond(), 25.0);
}

}  // namespace
}  // namespace tailcut
