// Tests for src/core/generation_metrics.h: which bucket bounds each latency histogram has
// (end-to-end times, queue waits and so first tokens behind long streams exceed 10 s;
// inter-token times do not).
#include "core/generation_metrics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "obs/metrics.h"

namespace tailcut {
namespace {

TEST(GenerationMetricsTest, LongWaitsGetBucketsPastTenSeconds) {
  MetricsRegistry registry;
  GenerationMetricFamilies families(registry);
  const GenerationMetrics m = families.ForModel("m");
  EXPECT_EQ(m.duration_seconds->upper_bounds(), LongLatencyBucketsSeconds());
  EXPECT_EQ(m.queue_seconds->upper_bounds(), LongLatencyBucketsSeconds());
  EXPECT_EQ(m.duration_seconds->upper_bounds().back(), 120.0);
  EXPECT_EQ(m.time_to_first_token_seconds->upper_bounds(), LongLatencyBucketsSeconds());
  EXPECT_EQ(m.inter_token_seconds->upper_bounds(), LatencyBucketsSeconds());

  // A 45 s stream lands in the 60 s bucket, not +Inf.
  m.duration_seconds->Observe(45.0);
  const std::vector<double>& bounds = m.duration_seconds->upper_bounds();
  const std::vector<uint64_t> counts = m.duration_seconds->CumulativeCounts();
  const size_t at_30 = std::find(bounds.begin(), bounds.end(), 30.0) - bounds.begin();
  const size_t at_60 = std::find(bounds.begin(), bounds.end(), 60.0) - bounds.begin();
  ASSERT_LT(at_60, bounds.size());
  EXPECT_EQ(counts[at_30], 0u);
  EXPECT_EQ(counts[at_60], 1u);
}

}  // namespace
}  // namespace tailcut
