#include "core/batch_scheduler.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <string>

namespace tailcut {

BatchScheduler::BatchScheduler(const BatchSchedulerOptions& options, ProcessFn process,
                               const Clock& clock)
    : options_(options),
      process_(std::move(process)),
      clock_(clock),
      queue_(options.queue, clock),
      cost_(options.cost),
      running_(static_cast<size_t>(std::max(1, options.num_workers))),
      expected_batch_micros_(options.initial_batch_estimate_micros) {
  for (size_t i = 0; i < running_.size(); ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

BatchScheduler::~BatchScheduler() {
  Stop(/*drain=*/false);
}

Status BatchScheduler::Schedule(std::vector<std::unique_ptr<BatchTask>>& tasks) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return Status::Unavailable("server is shutting down");
    int64_t rows = 0;
    for (const auto& t : tasks) rows += t->rows();
    if (Status admitted = queue_.CheckAdmission(rows); !admitted.ok()) return admitted;
    // Checked once per request, on the caller's thread: a few multiplications under the lock.
    const bool by_time = options_.max_queue_delay_micros > 0 && cost_.measured();
    int64_t wait = 0;
    if (by_time) {
      wait = WaitAheadMicrosLocked(clock_.NowMicros());
      // The margin: how much longer than estimated recent tasks waited (99th percentile).
      const int64_t expected = wait + std::max<int64_t>(0, cost_.wait_margin_micros());
      if (expected > options_.max_queue_delay_micros) {
        return Status::ResourceExhausted(
            "overloaded: this request would wait about " + std::to_string(expected / 1000) +
            " ms for the work ahead of it, over the " +
            std::to_string(options_.max_queue_delay_micros / 1000) + " ms limit; retry later");
      }
    }
    // Each row's estimate, for the margin: the wait ahead plus its request's rows before it.
    const BatchQueueOptions& q = queue_.options();
    int64_t rows_before = 0, tokens_before = 0;
    for (auto& t : tasks) {
      if (by_time) {
        t->estimated_wait_micros =
            wait + cost_.DrainMicros(rows_before, tokens_before, q.max_batch_size,
                                     BatchTokenLimitLocked());
        rows_before += t->rows();
        tokens_before += t->rows() * t->length();
      }
      queue_.Push(std::move(t));
    }
    tasks.clear();
  }
  wake_.notify_one();
  return Status::Ok();
}

void BatchScheduler::Stop(bool drain) {
  std::vector<std::unique_ptr<BatchTask>> dropped;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!stopping_) {
      stopping_ = true;
    }
    if (!drain) dropped = queue_.TakeAll();
  }
  wake_.notify_all();
  for (auto& t : dropped) t->Fail(Status::Unavailable("server is shutting down"));
  for (auto& w : workers_) {
    if (w.joinable()) w.join();
  }
}

int64_t BatchScheduler::queued_rows() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_.queued_rows();
}

int64_t BatchScheduler::queued_tokens() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_.queued_tokens();
}

size_t BatchScheduler::queued_tasks() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_.queued_tasks();
}

int64_t BatchScheduler::EstimatedWaitMicros() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!cost_.measured()) return 0;
  return WaitAheadMicrosLocked(clock_.NowMicros()) +
         std::max<int64_t>(0, cost_.wait_margin_micros());
}

BatchCostModel BatchScheduler::cost_model() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cost_;
}

int64_t BatchScheduler::WaitAheadMicrosLocked(int64_t now) const {
  if (!cost_.measured()) return 0;
  // The running batches' remainder: predicted at formation, less what has run. One that
  // overruns its prediction counts as about to end; the fit learns its time when it does.
  int64_t work = 0;
  for (const Running& r : running_) {
    if (r.busy) work += std::max<int64_t>(0, r.predicted_micros - (now - r.start_micros));
  }
  const BatchQueueOptions& q = queue_.options();
  work += cost_.DrainMicros(queue_.queued_rows(), queue_.queued_tokens(), q.max_batch_size,
                            BatchTokenLimitLocked());
  // The workers drain it side by side.
  return work / static_cast<int64_t>(running_.size());
}

int64_t BatchScheduler::BatchTokenLimitLocked() const {
  const int64_t by_tokens = queue_.options().max_batch_tokens;
  const int64_t by_time =
      options_.max_batch_micros > 0 ? cost_.TokensWithin(options_.max_batch_micros) : 0;
  if (by_tokens <= 0) return by_time;
  if (by_time <= 0) return by_tokens;
  return std::min(by_tokens, by_time);
}

void BatchScheduler::WorkerLoop(size_t worker) {
  std::vector<std::unique_ptr<BatchTask>> expired, abandoned;
  for (;;) {
    Batch batch;
    int64_t tokens = 0;  // Unpadded, for the cost model's padding.
    {
      std::unique_lock<std::mutex> lock(mutex_);
      for (;;) {
        if (queue_.queued_tasks() == 0) {
          if (stopping_) return;
          wake_.wait(lock);
          continue;
        }
        // When stopping, run what is left without waiting for batches to fill.
        if (stopping_ || queue_.ReadyToForm(BatchTokenLimitLocked())) break;
        const auto next = queue_.NextReadyTimeMicros(BatchTokenLimitLocked());
        const int64_t wait = next ? *next - clock_.NowMicros() : 0;
        if (wait > 0) wake_.wait_for(lock, std::chrono::microseconds(wait));
      }
      queue_.RemoveExpired(expected_batch_micros_.load(std::memory_order_relaxed), &expired,
                           &abandoned);
      batch = queue_.FormBatch(BatchTokenLimitLocked());
      if (!batch.tasks.empty()) {
        for (const auto& t : batch.tasks) {
          tokens += t->rows() * t->length();
          if (t->estimated_wait_micros >= 0) {
            cost_.ObserveWait(t->estimated_wait_micros,
                              batch.formed_at_micros - t->enqueue_time_micros());
          }
        }
        running_[worker] = {true, clock_.NowMicros(), cost_.BatchMicros(batch.padded_tokens())};
      }
    }
    for (auto& t : expired) {
      t->Fail(Status::DeadlineExceeded(
          "request deadline passed while queued; it could not be served in time"));
    }
    expired.clear();
    for (auto& t : abandoned) {
      if (options_.dropped_rows) options_.dropped_rows->Inc(static_cast<double>(t->rows()));
      // Failing (not just forgetting) the row ends a single-flight it leads: requests that
      // joined it from elsewhere then compute it themselves (EmbeddingCache::MakeWaiter).
      t->Fail(Status::Cancelled("the request ended while queued (its client went away, or "
                                "another of its rows failed)"));
    }
    abandoned.clear();
    if (batch.tasks.empty()) continue;

    const int64_t padded_tokens = batch.padded_tokens();
    const int64_t start = clock_.NowMicros();
    RunBatch(batch);
    const int64_t took = clock_.NowMicros() - start;
    {
      // The whole batch as its worker spent it (engine, padding, answers), machine load in.
      std::lock_guard<std::mutex> lock(mutex_);
      cost_.Observe(padded_tokens, tokens, took);
      running_[worker].busy = false;
    }
    // EWMA with weight 1/8: follows load changes within a few batches, ignores one outlier.
    const int64_t old = expected_batch_micros_.load(std::memory_order_relaxed);
    expected_batch_micros_.store(old + (took - old) / 8, std::memory_order_relaxed);
  }
}

void BatchScheduler::RunBatch(Batch& batch) {
  // The barrier keeps one batch's failure (an engine bug, bad_alloc, a library throwing
  // where it should return an error) from ending the process and every request in it.
  std::string what;
  try {
    process_(std::move(batch));
    return;
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
    what = "an exception that is not a std::exception";
  }
  size_t failed = 0;
  const Status status = Status::Internal("running the batch failed: " + what);
  for (auto& t : batch.tasks) {
    if (!t) continue;
    t->Fail(status);
    ++failed;
  }
  spdlog::error("batch of {} rows threw ({}); failed its {} remaining tasks", batch.rows, what,
                failed);
}

}  // namespace tailcut
