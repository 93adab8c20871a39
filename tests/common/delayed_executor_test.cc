#include "common/delayed_executor.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <vector>

namespace tailcut {
namespace {

// On a ManualClock nothing is due until the test moves time, so the order is the due order
// however slowly this thread queues the tasks.
TEST(DelayedExecutorTest, RunsInDueOrderOnItsClock) {
  ManualClock clock;
  DelayedExecutor ex(clock);
  std::mutex mu;
  std::vector<int> order;
  auto record = [&](int n) {
    return [&, n](bool cancelled) {
      EXPECT_FALSE(cancelled);
      std::lock_guard<std::mutex> lock(mu);
      order.push_back(n);
    };
  };
  std::promise<void> done;
  ex.RunAfter(30'000, [&, last = record(3)](bool cancelled) {
    last(cancelled);
    done.set_value();
  });
  ex.RunAfter(10'000, record(1));
  ex.RunAfter(20'000, record(2));

  // Just short of the first due time: a marker due now runs, and tasks run in due order on
  // one thread, so once it has run, anything due before it would have too.
  clock.AdvanceMicros(9'999);
  std::promise<std::vector<int>> at_marker;
  ex.RunAfter(0, [&](bool) {
    std::lock_guard<std::mutex> lock(mu);
    at_marker.set_value(order);
  });
  EXPECT_EQ(at_marker.get_future().get(), std::vector<int>{});

  clock.AdvanceMicros(20'001);
  ex.Poke();
  done.get_future().wait();
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
}

TEST(DelayedExecutorTest, RunsOnTheSystemClockByDefault) {
  DelayedExecutor ex;
  const int64_t before = SystemClock::Get().NowMicros();
  std::promise<int64_t> ran_at;
  ex.RunAfter(2'000, [&](bool) { ran_at.set_value(SystemClock::Get().NowMicros()); });
  // One-sided: never early (the steady clock is monotonic); how late depends on the machine.
  EXPECT_GE(ran_at.get_future().get() - before, 2'000);
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
