#include "cache/circuit_breaker.h"

namespace tailcut {

CircuitBreaker::CircuitBreaker(const CircuitBreakerOptions& options, const Clock& clock,
                               TransitionListener listener)
    : options_(options), clock_(clock), listener_(std::move(listener)) {}

bool CircuitBreaker::Allow() {
  if (state_.load(std::memory_order_acquire) == State::kClosed) return true;
  std::lock_guard<std::mutex> lock(mutex_);
  const int64_t now = clock_.NowMicros();
  const int64_t open_micros = options_.open_millis * 1000;
  switch (state_.load(std::memory_order_relaxed)) {
    case State::kClosed:  // Closed while we waited for the mutex.
      return true;
    case State::kOpen:
      if (now - opened_at_micros_ < open_micros) return false;
      TransitionLocked(State::kHalfOpen);
      probe_granted_micros_ = now;
      return true;
    case State::kHalfOpen:
      // One probe at a time; a probe never reported is presumed lost after open_millis.
      if (probe_granted_micros_ >= 0 && now - probe_granted_micros_ < open_micros) return false;
      probe_granted_micros_ = now;
      return true;
  }
  return false;
}

void CircuitBreaker::RecordSuccess() {
  // The common case, a healthy dependency, must not take the mutex.
  if (state_.load(std::memory_order_acquire) == State::kClosed &&
      failures_.load(std::memory_order_relaxed) == 0) {
    return;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  failures_.store(0, std::memory_order_relaxed);
  probe_granted_micros_ = -1;
  if (state_.load(std::memory_order_relaxed) != State::kClosed) TransitionLocked(State::kClosed);
}

void CircuitBreaker::RecordFailure() {
  std::lock_guard<std::mutex> lock(mutex_);
  const int failures = failures_.load(std::memory_order_relaxed) + 1;
  failures_.store(failures, std::memory_order_relaxed);
  switch (state_.load(std::memory_order_relaxed)) {
    case State::kClosed:
      if (options_.failure_threshold > 0 && failures >= options_.failure_threshold) {
        opened_at_micros_ = clock_.NowMicros();
        TransitionLocked(State::kOpen);
      }
      break;
    case State::kHalfOpen:
      // The probe (or a late attempt started while closed) failed: wait a full period again.
      opened_at_micros_ = clock_.NowMicros();
      probe_granted_micros_ = -1;
      TransitionLocked(State::kOpen);
      break;
    case State::kOpen:
      // Late reports of attempts made before the breaker opened; they must not extend the
      // open period, or a steady trickle of them would keep a recovered dependency cut off.
      break;
  }
}

int64_t CircuitBreaker::ProbeAtMicros() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (state_.load(std::memory_order_relaxed) != State::kOpen) return 0;
  return opened_at_micros_ + options_.open_millis * 1000;
}

void CircuitBreaker::TransitionLocked(State to) {
  const State from = state_.load(std::memory_order_relaxed);
  if (from == to) return;
  state_.store(to, std::memory_order_release);
  if (listener_) listener_(from, to);
}

std::string_view CircuitBreaker::StateName(State s) {
  switch (s) {
    case State::kClosed:
      return "closed";
    case State::kOpen:
      return "open";
    case State::kHalfOpen:
      return "half_open";
  }
  return "unknown";
}

}  // namespace tailcut
