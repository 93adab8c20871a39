#include "obs/metrics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace tailcut {
namespace {

// A value of the sample line starting with `prefix` ("name{labels} value").
double SampleValue(const std::string& text, const std::string& prefix) {
  const size_t at = text.find("\n" + prefix);
  if (at == std::string::npos) return -1;
  const size_t space = text.find(' ', at + 1 + prefix.size());
  return std::stod(text.substr(space + 1, text.find('\n', space) - space - 1));
}

// _count must equal the +Inf bucket in every scrape, even while observations land: the
// exposition format requires it, and strict scrapers (the integration tests' parser) reject
// the family otherwise. It used to print a separate counter, updated after the buckets, so a
// scrape in between disagreed (seen in the ASan integration tests).
TEST(HistogramTest, CountEqualsInfBucketWhileObserving) {
  MetricsRegistry registry;
  Histogram& h = registry.AddHistogram("t_seconds", "test", {0.1, 1.0}).Get();
  std::atomic<bool> stop{false};
  std::vector<std::thread> writers;
  for (int w = 0; w < 2; ++w) {
    writers.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) h.Observe(0.5);
    });
  }
  for (int scrape = 0; scrape < 2000; ++scrape) {
    const std::string text = registry.Serialize();
    const double inf = SampleValue(text, "t_seconds_bucket{le=\"+Inf\"}");
    const double count = SampleValue(text, "t_seconds_count");
    ASSERT_EQ(inf, count) << text;
  }
  stop = true;
  for (auto& t : writers) t.join();
}

TEST(BucketsTest, LongLatencyBucketsExtendTheShortOnesTo120Seconds) {
  const std::vector<double> short_buckets = LatencyBucketsSeconds();
  const std::vector<double> long_buckets = LongLatencyBucketsSeconds();
  EXPECT_EQ(short_buckets.back(), 10.0);
  ASSERT_GT(long_buckets.size(), short_buckets.size());
  EXPECT_TRUE(std::equal(short_buckets.begin(), short_buckets.end(), long_buckets.begin()));
  EXPECT_EQ(std::vector<double>(long_buckets.begin() + short_buckets.size(), long_buckets.end()),
            (std::vector<double>{20.0, 30.0, 60.0, 120.0}));
  EXPECT_TRUE(std::is_sorted(long_buckets.begin(), long_buckets.end()));
  EXPECT_EQ(std::adjacent_find(long_buckets.begin(), long_buckets.end()), long_buckets.end());
}

}  // namespace
}  // namespace tailcut
