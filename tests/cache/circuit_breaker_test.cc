#include "cache/circuit_breaker.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <utility>
#include <vector>

namespace tailcut {
namespace {

using State = CircuitBreaker::State;

struct Recorder {
  std::vector<std::pair<State, State>> transitions;
  CircuitBreaker::TransitionListener Listener() {
    return [this](State from, State to) { transitions.emplace_back(from, to); };
  }
};

CircuitBreakerOptions Opts(int threshold, int64_t open_millis) {
  CircuitBreakerOptions o;
  o.failure_threshold = threshold;
  o.open_millis = open_millis;
  return o;
}

TEST(CircuitBreakerTest, OpensAfterThresholdConsecutiveFailures) {
  ManualClock clock;
  Recorder rec;
  CircuitBreaker b(Opts(3, 1000), clock, rec.Listener());
  EXPECT_EQ(b.state(), State::kClosed);
  b.RecordFailure();
  b.RecordFailure();
  EXPECT_EQ(b.state(), State::kClosed);
  EXPECT_TRUE(b.Allow());
  b.RecordFailure();
  EXPECT_EQ(b.state(), State::kOpen);
  EXPECT_FALSE(b.Allow());
  ASSERT_EQ(rec.transitions.size(), 1u);
  EXPECT_EQ(rec.transitions[0], std::make_pair(State::kClosed, State::kOpen));
  EXPECT_EQ(b.ProbeAtMicros(), clock.NowMicros() + 1'000'000);
}

TEST(CircuitBreakerTest, SuccessResetsTheConsecutiveCount) {
  ManualClock clock;
  CircuitBreaker b(Opts(3, 1000), clock);
  for (int i = 0; i < 10; ++i) {
    b.RecordFailure();
    b.RecordFailure();
    b.RecordSuccess();
  }
  EXPECT_EQ(b.state(), State::kClosed);
  EXPECT_EQ(b.consecutive_failures(), 0);
}

TEST(CircuitBreakerTest, HalfOpenAfterOpenPeriodLetsExactlyOneProbeThrough) {
  ManualClock clock;
  Recorder rec;
  CircuitBreaker b(Opts(1, 1000), clock, rec.Listener());
  b.RecordFailure();
  ASSERT_EQ(b.state(), State::kOpen);
  clock.AdvanceMicros(999'999);
  EXPECT_FALSE(b.Allow());
  EXPECT_EQ(b.state(), State::kOpen);
  clock.AdvanceMicros(1);
  EXPECT_TRUE(b.Allow());  // The probe.
  EXPECT_EQ(b.state(), State::kHalfOpen);
  EXPECT_EQ(b.ProbeAtMicros(), 0);
  EXPECT_FALSE(b.Allow());  // Everyone else waits for the probe's outcome.
  EXPECT_FALSE(b.Allow());
  b.RecordSuccess();
  EXPECT_EQ(b.state(), State::kClosed);
  EXPECT_TRUE(b.Allow());
  ASSERT_EQ(rec.transitions.size(), 3u);
  EXPECT_EQ(rec.transitions[1], std::make_pair(State::kOpen, State::kHalfOpen));
  EXPECT_EQ(rec.transitions[2], std::make_pair(State::kHalfOpen, State::kClosed));
}

TEST(CircuitBreakerTest, FailedProbeReopensForAFullPeriod) {
  ManualClock clock;
  Recorder rec;
  CircuitBreaker b(Opts(2, 500), clock, rec.Listener());
  b.RecordFailure();
  b.RecordFailure();
  clock.AdvanceMicros(500'000);
  ASSERT_TRUE(b.Allow());
  clock.AdvanceMicros(40'000);  // The probe took 40 ms to fail.
  b.RecordFailure();
  EXPECT_EQ(b.state(), State::kOpen);
  EXPECT_EQ(b.ProbeAtMicros(), clock.NowMicros() + 500'000);
  clock.AdvanceMicros(499'999);
  EXPECT_FALSE(b.Allow());
  clock.AdvanceMicros(1);
  EXPECT_TRUE(b.Allow());
  b.RecordSuccess();
  EXPECT_EQ(b.state(), State::kClosed);
  ASSERT_EQ(rec.transitions.size(), 5u);
  EXPECT_EQ(rec.transitions[2], std::make_pair(State::kHalfOpen, State::kOpen));
}

TEST(CircuitBreakerTest, ALostProbeDoesNotWedgeHalfOpen) {
  ManualClock clock;
  CircuitBreaker b(Opts(1, 100), clock);
  b.RecordFailure();
  clock.AdvanceMicros(100'000);
  ASSERT_TRUE(b.Allow());  // This probe's outcome is never reported.
  clock.AdvanceMicros(99'999);
  EXPECT_FALSE(b.Allow());
  clock.AdvanceMicros(1);
  EXPECT_TRUE(b.Allow());  // Presumed lost; a new probe.
  EXPECT_FALSE(b.Allow());
  EXPECT_EQ(b.state(), State::kHalfOpen);
}

TEST(CircuitBreakerTest, LateFailuresWhileOpenDoNotExtendTheOpenPeriod) {
  ManualClock clock;
  CircuitBreaker b(Opts(1, 100), clock);
  b.RecordFailure();
  const int64_t probe_at = b.ProbeAtMicros();
  clock.AdvanceMicros(60'000);
  b.RecordFailure();  // An attempt started before the breaker opened, reported late.
  EXPECT_EQ(b.ProbeAtMicros(), probe_at);
  clock.AdvanceMicros(40'000);
  EXPECT_TRUE(b.Allow());
}

TEST(CircuitBreakerTest, ZeroThresholdNeverOpens) {
  ManualClock clock;
  CircuitBreaker b(Opts(0, 100), clock);
  for (int i = 0; i < 1000; ++i) b.RecordFailure();
  EXPECT_EQ(b.state(), State::kClosed);
  EXPECT_TRUE(b.Allow());
}

TEST(CircuitBreakerTest, StateNames) {
  EXPECT_EQ(CircuitBreaker::StateName(State::kClosed), "closed");
  EXPECT_EQ(CircuitBreaker::StateName(State::kOpen), "open");
  EXPECT_EQ(CircuitBreaker::StateName(State::kHalfOpen), "half_open");
}

// Many threads asking during half-open: exactly one gets the probe.
TEST(CircuitBreakerTest, ConcurrentAllowGrantsOneProbe) {
  ManualClock clock;
  CircuitBreaker b(Opts(1, 10), clock);
  b.RecordFailure();
  clock.AdvanceMicros(10'000);
  std::atomic<int> granted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) {
        if (b.Allow()) granted.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(granted.load(), 1);
  EXPECT_EQ(b.state(), State::kHalfOpen);
}

}  // namespace
}  // namespace tailcut
