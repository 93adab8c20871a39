#include "common/delayed_executor.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <vector>

namespace tailcut {
namespace {

TEST(DelayedExecutorTest, RunsInDueOrder) {
  DelayedExecutor ex;
  std::mutex mu;
  std::vector<int> order;
  std::promise<void> done;
  ex.RunAfter(30'000, [&](bool) {
    std::lock_guard<std::mutex> lock(mu);
    order.push_back(3);
    done.set_value();
  });
  ex.RunAfter(10'000, [&](bool) {
    std::lock_guard<std::mutex> lock(mu);
    order.push_back(1);
  });
  ex.RunAfter(20'000, [&](bool) {
    std::lock_guard<std::mutex> lock(mu);
    order.push_back(2);
  });
  done.get_future().wait();
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
}

TEST(DelayedExecutorTest, DestructionCancelsPendingTasks) {
  std::atomic<int> cancelled{0};
  {
    DelayedExecutor ex;
    for (int i = 0; i < 5; ++i) {
      ex.RunAfter(60'000'000, [&](bool c) {
        if (c) ++cancelled;
      });
    }
  }
  EXPECT_EQ(cancelled.load(), 5);
}

}  // namespace
}  // namespace tailcut
