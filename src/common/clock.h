// Clock: the one source of time for components whose behaviour depends on it (batching
// timeouts, deadlines, TTLs, controllers), injected so tests can drive time by hand
// (Envoy's TimeSource idea). Production code uses SystemClock; tests use ManualClock.
//
// Thread-safety: all implementations are safe to call from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace tailcut {

class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic time in microseconds since an arbitrary epoch; never goes backwards.
  virtual int64_t NowMicros() const = 0;
};

// Steady (monotonic) wall time.
class SystemClock final : public Clock {
 public:
  int64_t NowMicros() const override {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  // A process-wide instance for components given no clock.
  static SystemClock& Get() {
    static SystemClock clock;
    return clock;
  }
};

// A clock that moves only when told to; for deterministic tests.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t start_micros = 1'000'000) : now_micros_(start_micros) {}
  int64_t NowMicros() const override { return now_micros_.load(std::memory_order_acquire); }
  void AdvanceMicros(int64_t delta) { now_micros_.fetch_add(delta, std::memory_order_acq_rel); }
  void SetMicros(int64_t t) { now_micros_.store(t, std::memory_order_release); }

 private:
  std::atomic<int64_t> now_micros_;
};

}  // namespace tailcut
