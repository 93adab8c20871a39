#include "common/in_flight_gate.h"

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <thread>
#include <vector>

namespace tailcut {
namespace {

TEST(InFlightGateTest, CountsPassesUntilTheirLastCopyIsGone) {
  InFlightGate gate;
  auto pass = gate.Enter();
  ASSERT_NE(pass, nullptr);
  std::function<void()> callback = [pass] {};
  auto copy = callback;
  pass.reset();
  EXPECT_EQ(gate.in_flight(), 1);  // Still captured by the callbacks.
  callback = nullptr;
  EXPECT_EQ(gate.in_flight(), 1);
  copy = nullptr;
  EXPECT_EQ(gate.in_flight(), 0);
}

TEST(InFlightGateTest, ClosedGateRefusesNewWorkButKeepsTheOld) {
  InFlightGate gate;
  auto old = gate.Enter();
  gate.Close();
  EXPECT_TRUE(gate.closed());
  EXPECT_EQ(gate.Enter(), nullptr);
  EXPECT_EQ(gate.in_flight(), 1);
  old.reset();
  EXPECT_EQ(gate.in_flight(), 0);
}

TEST(InFlightGateTest, WaitIdleReturnsOnlyAfterTheLastPassOnAnotherThread) {
  InFlightGate gate;
  auto pass = gate.Enter();
  std::atomic<bool> released{false};
  // The other thread releases its pass only once it has seen the waiter blocked: ordered by
  // the in_flight count and the flag, not by time.
  std::thread worker([&gate, p = std::move(pass), &released]() mutable {
    while (!gate.closed()) std::this_thread::yield();
    released = true;
    p.reset();
  });
  gate.Close();
  gate.WaitIdle();
  EXPECT_TRUE(released.load());
  EXPECT_EQ(gate.in_flight(), 0);
  worker.join();
}

TEST(InFlightGateTest, ReportsASlowDrainWithTheCount) {
  InFlightGate gate;
  auto pass = gate.Enter();
  static std::atomic<int64_t> reported{-1};
  std::thread worker([p = std::move(pass)]() mutable {
    while (reported.load() < 0) std::this_thread::yield();  // Released after the report.
    p.reset();
  });
  gate.WaitIdle(/*slow_millis=*/1, [](int64_t n) { reported = n; });
  EXPECT_EQ(reported.load(), 1);
  worker.join();
}

TEST(InFlightGateTest, ManyThreadsEnterAndLeave) {
  InFlightGate gate;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&gate] {
      for (int i = 0; i < 10000; ++i) {
        auto p = gate.Enter();
        ASSERT_NE(p, nullptr);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(gate.in_flight(), 0);
  gate.Close();
  gate.WaitIdle();
}

}  // namespace
}  // namespace tailcut
