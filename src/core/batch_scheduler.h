// BatchScheduler: the threads around a BatchQueue. Callers (request threads) Schedule() tasks
// and return at once; dedicated worker threads form batches by the queue's policy and hand
// each to the model's process function. No model work ever runs on the caller's thread.
//
// A process function that throws fails its own batch, not the process: the worker catches
// the exception, fails the tasks still in the batch with Internal and goes on serving.
//
// Admission: a request is queued whole or refused whole (ResourceExhausted -> HTTP 429), by
// the queue's row bound (batch_queue.h) and, with max_queue_delay_micros, by time: the work
// ahead of it (what is left of the running batches, and the queued rows cut into batches at
// the cost fitted to recent batches, batch_cost_model.h), plus the margin by which recent
// tasks waited longer than estimated (99th percentile, fed back at batch formation), must
// run within the bound. Its own rows do not count: they are its service time, not its wait,
// so a large request is admitted behind a short wait and runs in as many batches as it
// needs, and the requests after it see its rows ahead of them.
//
// Thread-safety: Schedule() and the accessors are safe from any thread. The process function
// runs on worker threads, possibly concurrently when num_workers > 1.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "core/batch_cost_model.h"
#include "core/batch_queue.h"
#include "obs/metrics.h"

namespace tailcut {

// The servables' default for BatchSchedulerOptions::max_queue_delay_micros (the setting
// requests.max_queue_delay_millis), text and tensor models alike.
inline constexpr int64_t kDefaultMaxQueueDelayMicros = 200'000;
// The servables' default for BatchSchedulerOptions::max_batch_micros (the setting
// batching.max_batch_millis; see there), text and tensor models alike.
inline constexpr int64_t kDefaultMaxBatchMicros = 10'000;

struct BatchSchedulerOptions {
  BatchQueueOptions queue;
  // Threads that run batches, concurrently. 0 = chosen by the server from its CPUs
  // (src/config/engine_layout.h: one, spreading each batch over every CPU), else 1 here. One
  // worker keeps a batch's latency lowest; several one-thread workers run independent
  // batches side by side, which adds throughput for the small batches of short texts.
  int num_workers = 0;
  // Initial guess of one batch's run time, used for deadline decisions until batches have
  // been measured (an exponentially weighted average of measured times replaces it).
  int64_t initial_batch_estimate_micros = 5000;
  // Admission by time (see Admission above): the longest a request may be expected to wait
  // before its first batch starts; beyond it the request is refused. An admitted request is
  // then answered within about this plus its own batch. Lower it towards the latency SLO
  // minus a batch to refuse rather than queue; 0 = off (the row bound alone). Applies once a
  // batch has been measured.
  int64_t max_queue_delay_micros = 0;
  // Cost-aware cut-off: the longest a batch may be predicted to run (by the cost fitted to
  // recent batches, batch_cost_model.h); batch formation stops adding rows before the
  // prediction passes it, so a batch holds at most the padded tokens this allows, besides
  // queue.max_batch_tokens. A request waits for about the batch running ahead of it, then
  // runs in its own: both are bounded by this, whatever the machine's speed or the worker's
  // thread count, where a bound in tokens must be scaled to them by hand. Batching gains
  // throughput by spreading a batch's fixed cost over its rows, which stops paying once that
  // cost is a small part of the batch; past that, larger batches only add latency. Measured
  // on 2 slow vCPUs, QQP questions of natural length at 240-270 req/s (BENCHMARKS.md, "Tail
  // latency on natural traffic"): without it 512-token batches of 70-75 ms made P99 205-239
  // ms; bounds of 5 / 8 / 10 / 12 / 15 / 20 / 30 ms gave 10 ms the lowest P99 (47-53 ms),
  // and with it the rate held at P99 <= 86 ms rose from 180 to 310 req/s (one two-thread
  // worker). Raise it where the fixed cost per batch is large against the SLO (a GPU), lower
  // it towards the batch of one longest input when P99 is what matters; 0 = no time bound.
  // For tensor models a row is the unit of cost (BatchTask::length() is 1). Applies once
  // batches of two sizes have been measured.
  int64_t max_batch_micros = 0;
  // How fast the batch cost estimate behind admission by time follows measured batches.
  BatchCostModelOptions cost;
  // Counts the rows dropped unrun because their request ended (BatchTask::abandoned());
  // may be null. The model's tailcut_dropped_rows_total.
  Counter* dropped_rows = nullptr;
};

class BatchScheduler {
 public:
  // Runs one batch; must complete or fail every task in it. If it throws, the scheduler fails
  // every task still in `batch.tasks` (non-null: one handed on elsewhere is moved out first)
  // with Internal naming the exception, so a task answered before the throw is failed too:
  // tasks must tolerate Fail() after completing (EmbedItemTask ignores it).
  using ProcessFn = std::function<void(Batch&& batch)>;

  BatchScheduler(const BatchSchedulerOptions& options, ProcessFn process,
                 const Clock& clock = SystemClock::Get());
  ~BatchScheduler();  // Stop(/*drain=*/false).

  BatchScheduler(const BatchScheduler&) = delete;
  BatchScheduler& operator=(const BatchScheduler&) = delete;

  // Queues all of `tasks` or none of them: when they do not fit, returns ResourceExhausted
  // and leaves `tasks` untouched, so the caller can answer its client at once. After Stop()
  // returns Unavailable.
  Status Schedule(std::vector<std::unique_ptr<BatchTask>>& tasks);

  // Stops the workers. With drain, queued tasks still run first; without, they are failed
  // with Unavailable. Idempotent.
  void Stop(bool drain);

  int64_t queued_rows() const;
  // Sum of rows x length of queued tasks: the work waiting, before padding.
  int64_t queued_tokens() const;
  size_t queued_tasks() const;
  // Exponentially weighted average of recent batch run times.
  int64_t expected_batch_micros() const { return expected_batch_micros_.load(); }
  // The admission estimate now: how long a request queued now would wait for its first
  // batch, the wait margin included (0 before any batch has been measured).
  int64_t EstimatedWaitMicros() const;
  // A copy of the fitted batch cost model.
  BatchCostModel cost_model() const;
  const BatchSchedulerOptions& options() const { return options_; }

 private:
  // A worker's batch in progress, for the admission estimate.
  struct Running {
    bool busy = false;
    int64_t start_micros = 0;
    int64_t predicted_micros = 0;
  };

  void WorkerLoop(size_t worker);
  // The work ahead of a request queued now, per worker, without the wait margin; mutex_
  // held.
  int64_t WaitAheadMicrosLocked(int64_t now) const;
  // The padded-token bound of the next batch: queue.max_batch_tokens and what
  // max_batch_micros allows at the fitted cost, the smaller (0 = none); mutex_ held.
  int64_t BatchTokenLimitLocked() const;
  // Calls process_ on `batch`; on an exception, fails what is left in it (see ProcessFn).
  void RunBatch(Batch& batch);

  const BatchSchedulerOptions options_;
  const ProcessFn process_;
  const Clock& clock_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  BatchQueue queue_;       // Guarded by mutex_.
  bool stopping_ = false;  // Guarded by mutex_.
  BatchCostModel cost_;    // Guarded by mutex_.
  std::vector<Running> running_;  // One per worker; guarded by mutex_.
  std::atomic<int64_t> expected_batch_micros_;
  std::vector<std::thread> workers_;
};

}  // namespace tailcut
