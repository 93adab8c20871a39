#include "common/in_flight_gate.h"

#include <chrono>

namespace tailcut {

InFlightGate::~InFlightGate() {
  Close();
  WaitIdle();
}

InFlightGate::Pass InFlightGate::Enter() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (closed_) return nullptr;
  ++in_flight_;
  return std::make_shared<const Token>(this);
}

void InFlightGate::Leave() {
  // Notified under the lock: the waiter cannot see zero, return and destroy the gate until
  // this thread has released the mutex, and it touches nothing of the gate after that.
  std::lock_guard<std::mutex> lock(mutex_);
  if (--in_flight_ == 0) idle_.notify_all();
}

void InFlightGate::Close() {
  std::lock_guard<std::mutex> lock(mutex_);
  closed_ = true;
}

void InFlightGate::WaitIdle(int64_t slow_millis, void (*on_slow)(int64_t in_flight)) {
  std::unique_lock<std::mutex> lock(mutex_);
  while (in_flight_ > 0) {
    if (idle_.wait_for(lock, std::chrono::milliseconds(slow_millis),
                       [this] { return in_flight_ == 0; })) {
      break;
    }
    if (on_slow) on_slow(in_flight_);
  }
}

int64_t InFlightGate::in_flight() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return in_flight_;
}

bool InFlightGate::closed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return closed_;
}

}  // namespace tailcut
