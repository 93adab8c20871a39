#include "common/cpu_quota.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <thread>

namespace tailcut {
namespace {

TEST(CpuQuotaTest, ParsesCgroupV2CpuMax) {
  EXPECT_FALSE(ParseCgroupV2CpuMax("max 100000\n").has_value());
  EXPECT_DOUBLE_EQ(*ParseCgroupV2CpuMax("150000 100000\n"), 1.5);
  EXPECT_DOUBLE_EQ(*ParseCgroupV2CpuMax("200000 100000"), 2.0);
  EXPECT_FALSE(ParseCgroupV2CpuMax("").has_value());
  EXPECT_FALSE(ParseCgroupV2CpuMax("abc 100000").has_value());
  EXPECT_FALSE(ParseCgroupV2CpuMax("100000 0").has_value());
  EXPECT_FALSE(ParseCgroupV2CpuMax("-5 100000").has_value());
}

TEST(CpuQuotaTest, ParsesCgroupV1Quota) {
  EXPECT_FALSE(ParseCgroupV1Quota("-1\n", "100000\n").has_value());
  EXPECT_DOUBLE_EQ(*ParseCgroupV1Quota("50000\n", "100000\n"), 0.5);
  EXPECT_FALSE(ParseCgroupV1Quota("", "").has_value());
}

TEST(CpuQuotaTest, FractionalQuotaRoundsUpToAtLeastOne) {
  EXPECT_EQ(CpusFromQuota(0.5), 1);
  EXPECT_EQ(CpusFromQuota(1.0), 1);
  EXPECT_EQ(CpusFromQuota(1.5), 2);
  EXPECT_EQ(CpusFromQuota(4.0), 4);
}

TEST(CpuQuotaTest, AvailableCpusHonoursTheAffinityMask) {
  const int all = AvailableCpus();
  EXPECT_GE(all, 1);
  EXPECT_LE(all, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  cpu_set_t saved;
  ASSERT_EQ(sched_getaffinity(0, sizeof(saved), &saved), 0);
  int first = -1;
  for (int i = 0; i < CPU_SETSIZE && first < 0; ++i) {
    if (CPU_ISSET(i, &saved)) first = i;
  }
  ASSERT_GE(first, 0);
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
  EXPECT_EQ(AvailableCpus(), 1);
  ASSERT_EQ(sched_setaffinity(0, sizeof(saved), &saved), 0);
}

}  // namespace
}  // namespace tailcut
