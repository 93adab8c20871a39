// CircuitBreaker: stops calling a dependency that keeps failing, so that callers pay nothing
// (no queueing, no timeout) while it is down, and probes it now and then to notice recovery.
//
//   closed --(failure_threshold consecutive failures)--> open
//   open --(open_millis elapsed; the next Allow() is the probe)--> half-open
//   half-open --(success)--> closed        half-open --(failure)--> open (for open_millis again)
//
// The breaker only keeps score; the caller decides what an attempt and a failure are, and
// reports every attempt that Allow() let through with RecordSuccess() or RecordFailure().
// In half-open exactly one probe is let through. A probe whose outcome is never reported
// (dropped by a bug or a full queue) must not wedge the breaker: once open_millis have passed
// since it was granted, Allow() grants another.
//
// Time comes from the injected Clock, so every transition can be tested with a ManualClock.
// Open -> half-open happens lazily, in the first Allow() after the open period (state() keeps
// reporting kOpen until then); ProbeAtMicros() tells a prober when that will be.
//
// Thread-safety: every method is safe from any thread. Allow() and RecordSuccess() in the
// closed state with no failures pending are one atomic load each (they sit on every request's
// path); the rest takes a mutex. The transition listener runs under that mutex, in
// transition order, and must not call back into the breaker.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string_view>

#include "common/clock.h"

namespace tailcut {

struct CircuitBreakerOptions {
  // Consecutive failures that open the breaker. Lower reacts faster to an outage but lets a
  // short burst of errors cut off a healthy dependency; <= 0 disables the breaker (it never
  // opens).
  int failure_threshold = 5;
  // How long the breaker stays open before it lets one probe through. This is the longest a
  // recovered dependency goes unused, and the rate at which a dead one is probed.
  int64_t open_millis = 1000;
};

class CircuitBreaker {
 public:
  enum class State { kClosed, kOpen, kHalfOpen };
  using TransitionListener = std::function<void(State from, State to)>;

  CircuitBreaker(const CircuitBreakerOptions& options, const Clock& clock,
                 TransitionListener listener = nullptr);

  CircuitBreaker(const CircuitBreaker&) = delete;
  CircuitBreaker& operator=(const CircuitBreaker&) = delete;

  // Whether an attempt may be made now: always when closed; never while open, until
  // open_millis have passed, when the first caller becomes the half-open probe; in half-open
  // only that probe. Every true must be followed by RecordSuccess() or RecordFailure().
  bool Allow();
  void RecordSuccess();
  void RecordFailure();

  State state() const { return state_.load(std::memory_order_acquire); }
  // When open: the time (Clock micros) from which Allow() grants the probe. Otherwise 0.
  int64_t ProbeAtMicros() const;
  int consecutive_failures() const { return failures_.load(std::memory_order_relaxed); }

  static std::string_view StateName(State s);  // "closed", "open", "half_open"

 private:
  void TransitionLocked(State to);

  const CircuitBreakerOptions options_;
  const Clock& clock_;
  const TransitionListener listener_;
  mutable std::mutex mutex_;
  // Written under mutex_; atomic so the closed-state fast paths can read without it.
  std::atomic<State> state_{State::kClosed};
  std::atomic<int> failures_{0};
  int64_t opened_at_micros_ = 0;       // Under mutex_; valid while open.
  int64_t probe_granted_micros_ = -1;  // Under mutex_; -1: no probe out in half-open.
};

}  // namespace tailcut
