// EmbedJob and EmbedItemTask: how one embedding request travels through the batcher. The
// request becomes an EmbedJob holding the output rows; each of its inputs that must be
// computed becomes an EmbedItemTask in the model's queue. Items of one request may run in
// different batches; the job answers its caller when the last item is done, or at the
// first failure (later completions are then ignored).
//
// Thread-safety: EmbedJob's methods are safe to call from any thread (batch workers finish
// items concurrently). An EmbedItemTask is owned by one thread at a time.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "core/batch_task.h"
#include "core/inference_api.h"

namespace tailcut {

class EmbedJob {
 public:
  // `result` carries everything but the rows; `pending` items remain to be computed.
  EmbedJob(EmbedResult result, size_t pending, bool normalize, EmbedCallback done);

  // Rows known before queueing (cache hits).
  void SetRow(size_t index, std::span<const float> row);
  // A computed row, with the stage times of the batch it ran in. Answers when last.
  void CompleteItem(size_t index, std::span<const float> row, int64_t queue_micros,
                    int64_t batch_micros, int64_t infer_micros);
  // Answers with `status` unless already answered.
  void Fail(const Status& status);
  // Answers now if nothing is pending (every row came from the cache).
  void FinishIfComplete();

  bool finished() const { return finished_.load(std::memory_order_acquire); }
  // Called with each computed row, before the answer (e.g. to fill caches).
  void set_on_row(std::function<void(size_t, std::span<const float>)> f) { on_row_ = std::move(f); }

 private:
  void Finish();

  std::mutex mutex_;  // Guards result_.timings maxima.
  EmbedResult result_;
  std::atomic<size_t> pending_;
  std::atomic<bool> finished_{false};
  const bool normalize_;
  EmbedCallback done_;
  std::function<void(size_t, std::span<const float>)> on_row_;
};

class EmbedItemTask final : public BatchTask {
 public:
  EmbedItemTask(std::shared_ptr<EmbedJob> job, size_t index, std::vector<int64_t> ids, int variant,
                int64_t enqueued_micros, int64_t deadline_micros)
      : job_(std::move(job)),
        index_(index),
        ids_(std::move(ids)),
        variant_(variant),
        enqueued_(enqueued_micros),
        deadline_(deadline_micros) {}

  int64_t rows() const override { return 1; }
  int64_t length() const override { return static_cast<int64_t>(ids_.size()); }
  // Variants are different models: their items never share a batch.
  uint64_t batch_key() const override { return static_cast<uint64_t>(variant_); }
  int64_t enqueue_time_micros() const override { return enqueued_; }
  int64_t deadline_micros() const override { return deadline_; }
  void Fail(const Status& status) override { job_->Fail(status); }

  EmbedJob& job() { return *job_; }
  size_t index() const { return index_; }
  const std::vector<int64_t>& ids() const { return ids_; }
  int variant() const { return variant_; }

 private:
  std::shared_ptr<EmbedJob> job_;
  size_t index_;
  std::vector<int64_t> ids_;
  int variant_;
  int64_t enqueued_;
  int64_t deadline_;
};

}  // namespace tailcut
