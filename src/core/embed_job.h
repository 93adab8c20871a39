// EmbedJob and EmbedItemTask: how one embedding request travels through the server. The
// request becomes an EmbedJob holding the output rows; each input is then resolved by the
// cache (a hit), by another computation of the same input (single-flight), or by the model:
// those become EmbedItemTasks in the model's batch queue. Inputs of one request may run in
// different batches; the job answers its caller when the last row is in, or at the first
// failure (later completions are then ignored).
//
// Thread-safety: EmbedJob's methods are safe to call from any thread (batch workers, the
// Redis client thread and the request's own thread complete rows concurrently). An EmbedItemTask is
// owned by one thread at a time.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "cache/cache_key.h"
#include "core/batch_task.h"
#include "core/inference_api.h"

namespace tailcut {

class EmbedJob {
 public:
  // `result` carries everything but the rows; all of its rows are pending. `cancellation`:
  // the request's (EmbedRequest::cancellation), or null.
  EmbedJob(EmbedResult result, EmbedCallback done, CancellationFlag cancellation = nullptr);

  // One final row (already normalised as the request asked). Answers when it is the last.
  // Stage times and row count are those of the batch it ran in (zero for cache hits).
  void CompleteItem(size_t index, std::span<const float> row, int64_t queue_micros = 0,
                    int64_t batch_micros = 0, int64_t infer_micros = 0, int64_t batch_rows = 0);
  // Like CompleteItem, and counts the row as served from a cache; `reference`: found under
  // the reference variant's key (EmbedResult::reference_variant), not the computing one's.
  void CompleteFromCache(size_t index, std::span<const float> row, bool reference = false);
  // Time spent on cache lookups before queueing (the largest over the request's paths).
  void AddCacheMicros(int64_t micros);
  // A Redis lookup made for it (the longest is kept, as for the other stages).
  void AddRedisLookup(const StageTimings::RedisLookup& lookup);
  // Answers with `status` unless already answered.
  void Fail(const Status& status);

  bool finished() const { return finished_.load(std::memory_order_acquire); }
  // Whether the client went away: rows still to compute are not worth computing.
  bool cancelled() const { return IsCancelled(cancellation_); }
  size_t rows() const { return pending_total_; }
  int dimensions() const { return dimensions_; }

 private:
  void Finish();

  std::mutex mutex_;  // Guards result_.timings, cache_hits and reference_rows.
  EmbedResult result_;
  const size_t pending_total_;
  const int dimensions_;
  std::atomic<size_t> pending_;
  std::atomic<bool> finished_{false};
  EmbedCallback done_;
  const CancellationFlag cancellation_;
};

class EmbeddingCache;

// One input's tokens as the model takes them.
struct TokenizedInput {
  std::vector<int64_t> ids;
  std::vector<int64_t> type_ids;  // A reranker's pair: each id's token type. Empty = all 0.
};

// What a queued item must do for the cache when its row is computed (or cannot be).
struct CacheTicket {
  CacheKey key;
  uint32_t tag = 0;          // The model's id in the shared L1.
  std::string model;         // For L2 key namespacing.
  bool write = true;         // Store the row (false for Cache-Control: no-store).
  bool leader = false;       // Leads a single-flight: must complete it.
  bool remote_lock = false;  // Holds the cross-replica Redis lock `lock_token`.
  std::string lock_token;
};

class EmbedItemTask final : public BatchTask {
 public:
  EmbedItemTask(std::shared_ptr<EmbedJob> job, size_t index, TokenizedInput tokens, int variant,
                bool normalize, int64_t enqueued_micros, int64_t deadline_micros,
                std::optional<CacheTicket> ticket, EmbeddingCache* cache)
      : job_(std::move(job)),
        index_(index),
        tokens_(std::move(tokens)),
        variant_(variant),
        normalize_(normalize),
        enqueued_(enqueued_micros),
        deadline_(deadline_micros),
        ticket_(std::move(ticket)),
        cache_(cache) {}

  int64_t rows() const override { return 1; }
  int64_t length() const override { return static_cast<int64_t>(tokens_.ids.size()); }
  // Variants are different models: their items never share a batch.
  uint64_t batch_key() const override { return static_cast<uint64_t>(variant_); }
  int64_t enqueue_time_micros() const override { return enqueued_; }
  int64_t deadline_micros() const override { return deadline_; }
  // Its request ended while it was queued: the client went away, or another row failed.
  bool abandoned() const override { return job_->cancelled() || job_->finished(); }
  // Ignored once Complete() has run (a batch that throws after answering some of its tasks
  // fails them all: the cache's single-flight must not be completed a second time).
  void Fail(const Status& status) override;

  // Delivers the computed row: to the job, and to the cache and waiting requests. Once.
  // `batch_rows`: the rows of the batch it ran in.
  void Complete(std::span<const float> row, int64_t queue_micros, int64_t batch_micros,
                int64_t infer_micros, int64_t batch_rows);

  EmbedJob& job() { return *job_; }
  size_t index() const { return index_; }
  const std::vector<int64_t>& ids() const { return tokens_.ids; }
  const std::vector<int64_t>& type_ids() const { return tokens_.type_ids; }
  int variant() const { return variant_; }
  bool normalize() const { return normalize_; }

 private:
  std::shared_ptr<EmbedJob> job_;
  size_t index_;
  TokenizedInput tokens_;
  int variant_;
  bool normalize_;
  int64_t enqueued_;
  int64_t deadline_;
  std::optional<CacheTicket> ticket_;
  EmbeddingCache* cache_;
  bool answered_ = false;  // Owned by one thread at a time, like the task.
};

}  // namespace tailcut
