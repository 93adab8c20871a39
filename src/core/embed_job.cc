#include "core/embed_job.h"

#include <algorithm>
#include <cstring>

#include "core/embedding_cache.h"

namespace tailcut {

EmbedJob::EmbedJob(EmbedResult result, EmbedCallback done, CancellationFlag cancellation)
    : result_(std::move(result)),
      pending_total_(result_.token_counts.size()),
      dimensions_(result_.dimensions),
      pending_(pending_total_),
      done_(std::move(done)),
      cancellation_(std::move(cancellation)) {}

void EmbedJob::CompleteItem(size_t index, std::span<const float> row, int64_t queue_micros,
                            int64_t batch_micros, int64_t infer_micros, int64_t batch_rows) {
  if (finished()) return;
  std::memcpy(result_.embeddings.data() + index * dimensions_, row.data(),
              std::min<size_t>(row.size(), dimensions_) * sizeof(float));
  if (queue_micros || batch_micros || infer_micros || batch_rows) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& t = result_.timings;
    t.queue_micros = std::max(t.queue_micros, queue_micros);
    t.batch_micros = std::max(t.batch_micros, batch_micros);
    t.infer_micros = std::max(t.infer_micros, infer_micros);
    t.batch_rows = std::max(t.batch_rows, batch_rows);
  }
  // acq_rel: the last finisher must see every other thread's row writes.
  if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) Finish();
}

void EmbedJob::CompleteFromCache(size_t index, std::span<const float> row, bool reference) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++result_.cache_hits;
    if (reference) ++result_.reference_rows;
  }
  CompleteItem(index, row);
}

void EmbedJob::AddCacheMicros(int64_t micros) {
  std::lock_guard<std::mutex> lock(mutex_);
  result_.timings.cache_micros = std::max(result_.timings.cache_micros, micros);
}

void EmbedJob::AddRedisLookup(const StageTimings::RedisLookup& lookup) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& kept = result_.timings.redis_lookup;
  if (kept.keys == 0 || lookup.micros > kept.micros) kept = lookup;
}

void EmbedJob::Fail(const Status& status) {
  if (finished_.exchange(true, std::memory_order_acq_rel)) return;
  done_(status);
}

void EmbedJob::Finish() {
  if (finished_.exchange(true, std::memory_order_acq_rel)) return;
  EmbedResult result;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    result = std::move(result_);
  }
  done_(std::move(result));
}

void EmbedItemTask::Fail(const Status& status) {
  if (answered_) return;
  answered_ = true;
  if (ticket_ && cache_) cache_->OnComputeFailed(*ticket_, status);
  job_->Fail(status);
}

void EmbedItemTask::Complete(std::span<const float> row, int64_t queue_micros, int64_t batch_micros,
                             int64_t infer_micros, int64_t batch_rows) {
  if (answered_) return;
  answered_ = true;
  // Store first: a client that repeats the request as soon as it has the answer must hit.
  if (ticket_ && cache_) cache_->OnComputed(*ticket_, row);
  job_->CompleteItem(index_, row, queue_micros, batch_micros, infer_micros, batch_rows);
}

}  // namespace tailcut
