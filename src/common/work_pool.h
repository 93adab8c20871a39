// WorkPool: a fixed set of threads for the CPU work of requests (parsing JSON bodies,
// tokenising, computing cache keys, serialising responses), so that IO threads only do IO and
// the threads that finish work (batch workers, the Redis client) hand results on instead of
// formatting them. Sized from the CPUs the process may use (src/common/cpu_quota.h).
//
// Two lanes keep one large request from delaying small ones. Light tasks may use every
// thread; heavy tasks (a multi-MiB body, a response of thousands of rows) at most
// threads - 1 at once, so with two or more threads a light task never waits for a heavy one
// to finish, only for a free thread. Light tasks are taken first.
//
// TrySubmit() is for new work and is bounded (max_queued_tasks): when it refuses, the caller
// answers "busy" at once. Submit() is for the continuation of work already admitted (a
// response to serialise) and is never refused: its number is bounded by the requests in
// flight. After Stop(), Submit() runs the task on the calling thread, so a late completion is
// still delivered; TrySubmit() refuses.
//
// Thread-safety: every method is safe from any thread. Tasks must not call Stop().
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tailcut {

struct WorkPoolOptions {
  // Threads; 0 = the CPUs the process may use (AvailableCpus()), and never fewer than 2, so
  // the light lane always has a thread a heavy task cannot take. More threads than CPUs only
  // help when tasks block, which they should not.
  int threads = 0;
  // Most tasks waiting for a thread (both lanes) before TrySubmit() refuses. Bounds the
  // memory and the wait of work that has not started; a request refused here is answered
  // 503 with Retry-After. Roughly: tolerated wait x tasks per second one thread runs.
  int64_t max_queued_tasks = 4096;
};

class WorkPool {
 public:
  enum class Lane { kLight, kHeavy };
  using Task = std::function<void()>;

  explicit WorkPool(const WorkPoolOptions& options);
  ~WorkPool();  // Stop().

  WorkPool(const WorkPool&) = delete;
  WorkPool& operator=(const WorkPool&) = delete;

  // Queues new work; false (and `task` untouched) when max_queued_tasks wait or after Stop().
  bool TrySubmit(Lane lane, Task& task);
  // Queues the continuation of admitted work; never refused (see the file comment).
  void Submit(Lane lane, Task task);

  // Runs what is queued, then joins the threads. Idempotent.
  void Stop();

  // Whether the calling thread is one of this pool's: a continuation already on it can run
  // inline instead of being queued again.
  bool OnPoolThread() const;

  int threads() const { return static_cast<int>(threads_.size()); }
  int64_t queued() const;

 private:
  void ThreadLoop();
  // Heavy tasks running at once, at most; threads - 1 (but at least 1).
  int MaxHeavyRunning() const;

  const WorkPoolOptions options_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Task> light_;  // Guarded by mutex_.
  std::deque<Task> heavy_;  // Guarded by mutex_.
  int heavy_running_ = 0;   // Guarded by mutex_.
  bool stopping_ = false;   // Guarded by mutex_.
  std::vector<std::thread> threads_;
};

}  // namespace tailcut
