#include "common/delayed_executor.h"

#include <chrono>

namespace tailcut {

DelayedExecutor::DelayedExecutor(const Clock& clock) : clock_(clock), thread_([this] { Loop(); }) {}

DelayedExecutor::~DelayedExecutor() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void DelayedExecutor::RunAfter(int64_t delay_micros, Task task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!stopping_) {
      queue_.push({clock_.NowMicros() + std::max<int64_t>(0, delay_micros), next_sequence_++,
                   std::move(task)});
      task = nullptr;
    }
  }
  if (task) {
    task(true);  // Executor already stopping: answer at once.
    return;
  }
  wake_.notify_one();
}

void DelayedExecutor::Poke() {
  // Under the lock, so the wake-up cannot fall between the loop's clock read and its wait.
  std::lock_guard<std::mutex> lock(mutex_);
  wake_.notify_all();
}

void DelayedExecutor::Loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    if (stopping_) break;
    if (queue_.empty()) {
      wake_.wait(lock);
      continue;
    }
    const int64_t wait = queue_.top().due_micros - clock_.NowMicros();
    if (wait > 0) {
      wake_.wait_for(lock, std::chrono::microseconds(wait));
      continue;
    }
    Task task = std::move(const_cast<Entry&>(queue_.top()).task);
    queue_.pop();
    lock.unlock();
    task(false);
    lock.lock();
  }
  // Answer everything left so no owner waits forever.
  while (!queue_.empty()) {
    Task task = std::move(const_cast<Entry&>(queue_.top()).task);
    queue_.pop();
    lock.unlock();
    task(true);
    lock.lock();
  }
}

}  // namespace tailcut
