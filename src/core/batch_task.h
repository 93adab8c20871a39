// BatchTask: one unit of work the dynamic batcher can put into a batch: a text to embed, or a
// KServe request's rows. Pure interface, like TensorFlow's BatchTask: the batcher only needs
// a task's size, its length (for padding-aware grouping), which tasks it may share a batch
// with, when it arrived and by when it must be done.
//
// Thread-safety: a task is owned by one thread at a time (the caller, then the queue under its
// lock, then the worker that runs its batch); implementations need no locking of their own.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/status.h"

namespace tailcut {

class BatchTask {
 public:
  virtual ~BatchTask() = default;

  // Rows this task adds to the batch dimension (1 for a text).
  virtual int64_t rows() const = 0;
  // Length along the padded axis (tokens for text; 1 for fixed-shape tensors). A batch costs
  // rows x longest length, so grouping similar lengths avoids paying for padding.
  virtual int64_t length() const = 0;
  // Tasks may share a batch only when their keys are equal (e.g. the non-batch shape of a
  // tensor input). Text tasks all use 0: padding makes any lengths compatible.
  virtual uint64_t batch_key() const { return 0; }

  // Monotonic microseconds (the scheduler's clock) when the task was queued.
  virtual int64_t enqueue_time_micros() const = 0;
  // Latest useful completion time in the same clock; 0 = none. A task that can no longer
  // make it is dropped from the queue and failed instead of run.
  virtual int64_t deadline_micros() const { return 0; }

  // Whether running the task is wasted: its request ended while it was queued (the client
  // went away, or another of its rows failed). The batcher then drops it unrun, like a task
  // past its deadline, and fails it with Cancelled.
  virtual bool abandoned() const { return false; }

  // Called exactly once, instead of running, when the task is dropped (deadline passed,
  // request abandoned, shutdown). Implementations answer their caller with `status`.
  virtual void Fail(const Status& status) = 0;

  // Written by BatchScheduler when it admits the task by time: the wait it estimated for it
  // (the work ahead of its request, and of its request's rows before it), which it compares
  // with the actual wait when the task goes into a batch. -1 = none.
  int64_t estimated_wait_micros = -1;
};

// Tasks that run together, in the order the batcher chose.
struct Batch {
  std::vector<std::unique_ptr<BatchTask>> tasks;
  int64_t rows = 0;
  int64_t max_length = 0;
  int64_t formed_at_micros = 0;
  int64_t padded_tokens() const { return rows * max_length; }
};

}  // namespace tailcut
