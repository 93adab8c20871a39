#include "common/clock.h"

#include <gtest/gtest.h>

namespace tailcut {
namespace {

TEST(ManualClockTest, MovesOnlyWhenTold) {
  ManualClock clock(100);
  EXPECT_EQ(clock.NowMicros(), 100);
  clock.AdvanceMicros(250);
  EXPECT_EQ(clock.NowMicros(), 350);
  clock.SetMicros(7);
  EXPECT_EQ(clock.NowMicros(), 7);
}

TEST(SystemClockTest, IsMonotonic) {
  const int64_t a = SystemClock::Get().NowMicros();
  const int64_t b = SystemClock::Get().NowMicros();
  EXPECT_LE(a, b);
}

}  // namespace
}  // namespace tailcut
