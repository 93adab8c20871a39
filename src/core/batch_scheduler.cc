#include "core/batch_scheduler.h"

#include <spdlog/spdlog.h>

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
      expected_batch_micros_(options.initial_batch_estimate_micros) {
  const int workers = std::max(1, options_.num_workers);
  for (int i = 0; i < workers; ++i) workers_.emplace_back([this] { WorkerLoop(); });
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
    const int64_t limit = queue_.options().max_enqueued_rows;
    if (queue_.queued_tasks() > 0 && queue_.queued_rows() + rows > limit) {
      return Status::ResourceExhausted("queue full: " + std::to_string(queue_.queued_rows()) +
                                       " of " + std::to_string(limit) +
                                       " rows queued, request needs " + std::to_string(rows));
    }
    for (auto& t : tasks) {
      // Cannot fail: capacity was checked above for the whole request.
      (void)queue_.Enqueue(t);
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

void BatchScheduler::WorkerLoop() {
  std::vector<std::unique_ptr<BatchTask>> expired;
  for (;;) {
    Batch batch;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      for (;;) {
        if (queue_.queued_tasks() == 0) {
          if (stopping_) return;
          wake_.wait(lock);
          continue;
        }
        // When stopping, run what is left without waiting for batches to fill.
        if (stopping_ || queue_.ReadyToForm()) break;
        const auto next = queue_.NextReadyTimeMicros();
        const int64_t wait = next ? *next - clock_.NowMicros() : 0;
        if (wait > 0) wake_.wait_for(lock, std::chrono::microseconds(wait));
      }
      queue_.RemoveExpired(expected_batch_micros_.load(std::memory_order_relaxed), &expired);
      batch = queue_.FormBatch();
    }
    for (auto& t : expired) {
      t->Fail(Status::DeadlineExceeded(
          "request deadline passed while queued; it could not be served in time"));
    }
    expired.clear();
    if (batch.tasks.empty()) continue;

    const int64_t start = clock_.NowMicros();
    RunBatch(batch);
    const int64_t took = clock_.NowMicros() - start;
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
