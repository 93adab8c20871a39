// DelayedExecutor: runs callbacks at a later time on one background thread. For work that
// must wait without holding any thread that matters (the IO threads, the Redis client
// thread): polling for a value another replica is computing, backing off before a retry.
//
// Callbacks run in due-time order on the executor's thread; they must be short (post real
// work elsewhere). Callbacks still pending at destruction are run with `cancelled` = true
// so owners waiting on them are always answered.
//
// Time comes from an injected Clock (common/clock.h). Between checks the thread sleeps in
// real time for what the clock says is left, so a ManualClock moved forward is noticed within
// the real-time equivalent of the earliest delay, or at once by the next RunAfter() or Poke().
//
// Thread-safety: RunAfter() and Poke() are safe from any thread, including from inside a
// callback.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <queue>
#include <thread>
#include <vector>

#include "common/clock.h"

namespace tailcut {

class DelayedExecutor {
 public:
  using Task = std::function<void(bool cancelled)>;

  explicit DelayedExecutor(const Clock& clock = SystemClock::Get());
  ~DelayedExecutor();
  DelayedExecutor(const DelayedExecutor&) = delete;
  DelayedExecutor& operator=(const DelayedExecutor&) = delete;

  // Runs `task(false)` once `delay_micros` have passed on the clock.
  void RunAfter(int64_t delay_micros, Task task);
  // Makes the thread look at the clock now (after a ManualClock was moved, in tests).
  void Poke();

 private:
  struct Entry {
    int64_t due_micros;
    uint64_t sequence;  // FIFO among equal due times.
    Task task;
    bool operator>(const Entry& o) const {
      return due_micros != o.due_micros ? due_micros > o.due_micros : sequence > o.sequence;
    }
  };
  void Loop();

  const Clock& clock_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> queue_;
  uint64_t next_sequence_ = 0;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace tailcut
