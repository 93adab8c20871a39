#include "common/work_pool.h"

#include <algorithm>

#include "common/cpu_quota.h"

namespace tailcut {
namespace {

// The pool whose thread this is, for OnPoolThread().
thread_local const WorkPool* current_pool = nullptr;

}  // namespace

WorkPool::WorkPool(const WorkPoolOptions& options) : options_(options) {
  const int n = options_.threads > 0 ? options_.threads : std::max(2, AvailableCpus());
  threads_.reserve(n);
  for (int i = 0; i < n; ++i) threads_.emplace_back([this] { ThreadLoop(); });
}

WorkPool::~WorkPool() { Stop(); }

int WorkPool::MaxHeavyRunning() const { return std::max(1, threads() - 1); }

bool WorkPool::TrySubmit(Lane lane, Task& task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return false;
    if (static_cast<int64_t>(light_.size() + heavy_.size()) >= options_.max_queued_tasks) {
      return false;
    }
    (lane == Lane::kLight ? light_ : heavy_).push_back(std::move(task));
  }
  wake_.notify_one();
  return true;
}

void WorkPool::Submit(Lane lane, Task task) {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!stopping_) {
      (lane == Lane::kLight ? light_ : heavy_).push_back(std::move(task));
      lock.unlock();
      wake_.notify_one();
      return;
    }
  }
  task();  // Stopped: deliver on the caller's thread rather than drop.
}

void WorkPool::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

bool WorkPool::OnPoolThread() const { return current_pool == this; }

int64_t WorkPool::queued() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int64_t>(light_.size() + heavy_.size());
}

void WorkPool::ThreadLoop() {
  current_pool = this;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    // With a heavy-lane slot free and heavy work waiting, or light work waiting, run it;
    // stopping, run what is left before leaving (a queued request still gets its answer).
    const bool heavy_ok = !heavy_.empty() && heavy_running_ < MaxHeavyRunning();
    if (light_.empty() && !heavy_ok) {
      if (stopping_ && heavy_.empty()) return;
      wake_.wait(lock);
      continue;
    }
    const bool heavy = light_.empty();
    std::deque<Task>& lane = heavy ? heavy_ : light_;
    Task task = std::move(lane.front());
    lane.pop_front();
    if (heavy) ++heavy_running_;
    lock.unlock();
    task();
    task = nullptr;  // Its captures die outside the lock, like the task itself.
    lock.lock();
    if (heavy) {
      --heavy_running_;
      // A heavy slot opened: a thread parked because of the cap may now take heavy work.
      if (!heavy_.empty()) wake_.notify_one();
    }
  }
}

}  // namespace tailcut
