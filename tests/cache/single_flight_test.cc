#include "cache/single_flight.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace tailcut {
namespace {

TEST(SingleFlightTest, FirstLeadsOthersWaitForItsRow) {
  SingleFlight sf;
  const CacheKey key{1, 2};
  std::vector<float> seen;
  int calls = 0;
  EXPECT_TRUE(sf.JoinOrLead(key, nullptr));
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(sf.JoinOrLead(key, [&](const Status& s, std::span<const float> row) {
      EXPECT_TRUE(s.ok());
      seen.assign(row.begin(), row.end());
      ++calls;
    }));
  }
  EXPECT_EQ(sf.in_flight(), 1u);
  const float row[] = {0.5f, -1.0f};
  sf.Complete(key, Status::Ok(), row);
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(seen, (std::vector<float>{0.5f, -1.0f}));
  EXPECT_EQ(sf.in_flight(), 0u);
  // The flight is over: the next miss leads again.
  EXPECT_TRUE(sf.JoinOrLead(key, nullptr));
}

TEST(SingleFlightTest, FailureReachesWaiters) {
  SingleFlight sf;
  const CacheKey key{3, 4};
  ASSERT_TRUE(sf.JoinOrLead(key, nullptr));
  Status got;
  ASSERT_FALSE(sf.JoinOrLead(key, [&](const Status& s, std::span<const float>) { got = s; }));
  sf.Complete(key, Status::DeadlineExceeded("late"), {});
  EXPECT_EQ(got.code(), Status::Code::kDeadlineExceeded);
}

TEST(SingleFlightTest, ConcurrentMissesElectExactlyOneLeaderPerKey) {
  SingleFlight sf;
  std::atomic<int> leaders{0}, served{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (uint64_t k = 0; k < 200; ++k) {
        const CacheKey key{k, k};
        if (sf.JoinOrLead(key, [&](const Status&, std::span<const float>) { ++served; })) {
          ++leaders;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(leaders.load(), 200);
  for (uint64_t k = 0; k < 200; ++k) sf.Complete(CacheKey{k, k}, Status::Ok(), {});
  EXPECT_EQ(served.load(), 8 * 200 - 200);
}

}  // namespace
}  // namespace tailcut
