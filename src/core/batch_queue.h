// BatchQueue: the batching policy, with no threads in it: a bounded FIFO of tasks and the
// rule that turns them into batches. Kept apart from the threads (BatchScheduler) so every
// decision can be tested deterministically with a ManualClock.
//
// Policy:
//  - Admission by rows: a request is refused (ResourceExhausted -> HTTP 429) when the rows
//    queued ahead of it plus its first batch's worth of its own (at most max_batch_size)
//    would pass max_enqueued_rows, so overload is answered at once instead of by unbounded
//    queueing delay. A request with more rows than that still gets in while few rows are
//    ahead of it (its other rows run in later batches), and an empty queue admits anything.
//    Admission by time is BatchScheduler's (it knows what is running).
//  - Readiness: a batch is formed when the queue can fill max_batch_size rows or
//    max_batch_tokens padded tokens (or the smaller bound the caller passes: BatchScheduler's
//    time cut-off), or when the oldest task has waited batch_timeout_micros.
//  - Grouping: the oldest task always goes first (no starvation); the rest of the batch is
//    picked among the next `grouping_window` tasks by closeness of length, oldest first on
//    ties, while rows x longest length stays within max_batch_tokens. Short texts are thus
//    not padded to a long one that happens to be queued beside them.
//  - Deadlines: tasks whose deadline is before now + the expected batch time are removed and
//    handed back for failing; they would only waste compute. So are tasks whose request
//    ended while they waited (BatchTask::abandoned()).
//
// Thread-safety: none; BatchScheduler serialises access under its mutex.
#pragma once

#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "common/clock.h"
#include "core/batch_task.h"

namespace tailcut {

struct BatchQueueOptions {
  // Most rows (texts) in one batch. Larger batches raise throughput under load but make each
  // batch, and so every request in it, slower. With max_batch_tokens as the real bound this
  // only caps batches of very short texts (64 x 8 tokens).
  int64_t max_batch_size = 64;
  // Most padded tokens (rows x longest length) in one batch; bounds one batch's compute time
  // whatever the text lengths. 0 = no limit. A single task longer than this still runs alone.
  // On the 2-core reference machine the engine's throughput peaks at about 512 tokens per
  // batch for every length (16 x 32, 64 x 8, 128 x 4) and a batch that size takes ~30 ms,
  // a third of the 86 ms SLO; larger batches add latency and lose throughput
  // (BENCHMARKS.md, "Engine ceiling"). Scale it with the machine's speed.
  int64_t max_batch_tokens = 512;
  // How long the oldest task may wait for its batch to fill. 0 = run whatever is queued as
  // soon as a worker is free (batches still grow under load while the worker is busy).
  // Raise it to trade latency at light load for larger batches.
  int64_t batch_timeout_micros = 0;
  // Queue bound in rows: rows ahead of a new request plus its first batch (see Admission
  // above). With admission by time on (BatchSchedulerOptions::max_queue_delay_micros) that
  // bounds queueing delay and this is the backstop for memory; without it, roughly: max
  // tolerated queue wait x engine throughput. Queued rows can reach this plus a request's
  // size less one batch (a large request admitted behind others).
  int64_t max_enqueued_rows = 1024;
  // How many queued tasks batch formation considers when grouping by length.
  int64_t grouping_window = 256;
};

class BatchQueue {
 public:
  BatchQueue(const BatchQueueOptions& options, const Clock& clock);

  // Ok when a request of `rows` rows may be queued now by the row bound (see Admission),
  // else ResourceExhausted saying why.
  Status CheckAdmission(int64_t rows) const;
  // Queues `task` without checking the bound (the caller checked its whole request).
  void Push(std::unique_ptr<BatchTask> task);
  // CheckAdmission() for the one task, then Push(); on refusal `task` stays the caller's.
  Status Enqueue(std::unique_ptr<BatchTask>& task);

  // Whether a batch should be formed now (see Readiness above), a full batch being
  // `max_batch_tokens` padded tokens (as FormBatch(max_batch_tokens) would cut it).
  bool ReadyToForm(int64_t max_batch_tokens) const;
  bool ReadyToForm() const { return ReadyToForm(options_.max_batch_tokens); }
  // When ReadyToForm() will become true by waiting alone; nullopt if the queue is empty.
  std::optional<int64_t> NextReadyTimeMicros(int64_t max_batch_tokens) const;
  std::optional<int64_t> NextReadyTimeMicros() const {
    return NextReadyTimeMicros(options_.max_batch_tokens);
  }

  // Removes tasks that cannot meet their deadline given `expected_batch_micros`, into
  // `expired`, and (when `abandoned` is given) tasks whose request ended
  // (BatchTask::abandoned()), into `abandoned`. Call before FormBatch().
  void RemoveExpired(int64_t expected_batch_micros,
                     std::vector<std::unique_ptr<BatchTask>>* expired,
                     std::vector<std::unique_ptr<BatchTask>>* abandoned = nullptr);

  // Takes the next batch off the queue (empty if the queue is), of at most
  // `max_batch_tokens` padded tokens (0 = no limit; BatchScheduler passes the smaller of the
  // option and its time bound's, see BatchSchedulerOptions::max_batch_micros).
  Batch FormBatch(int64_t max_batch_tokens);
  Batch FormBatch() { return FormBatch(options_.max_batch_tokens); }

  // Takes every queued task (for shutdown).
  std::vector<std::unique_ptr<BatchTask>> TakeAll();

  int64_t queued_rows() const { return queued_rows_; }
  int64_t queued_tokens() const { return queued_tokens_; }
  size_t queued_tasks() const { return tasks_.size(); }
  const BatchQueueOptions& options() const { return options_; }

 private:
  BatchQueueOptions options_;
  const Clock& clock_;
  std::deque<std::unique_ptr<BatchTask>> tasks_;
  int64_t queued_rows_ = 0;
  int64_t queued_tokens_ = 0;  // Sum of rows x length: work waiting, before padding.
};

}  // namespace tailcut
