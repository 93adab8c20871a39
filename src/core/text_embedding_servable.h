// TextEmbeddingServable: a text model being served, a text-embedding model or a reranker
// (ModelKind::kReranker: its inputs are pairs of texts, tokenised with the pair template and
// token types, and its one-element "embedding" is the pair's score; the batching, variants and
// cache are the same, warm-up and the reference backfill are off): its precision variants
// (each a loaded, warmed TextEmbeddingModel sharing the one ONNX Runtime thread pool), its
// batch queue and worker, the precision controller choosing the variant for requests that pin
// none, and the request path in front of them:
//
//   caller thread: validate -> tokenise -> queue each input as an item   (Embed)
//   worker thread: form batch -> pad -> run the variant -> fill job rows (ProcessBatch)
//   controller thread: once per interval, load signals -> maybe switch the active variant
//
// Every variant stays loaded and warm, so a switch is a pointer change: no latency spike. A
// variant whose file fails to load is reported (Describe()) and the others still serve.
//
// Lifetime: callbacks that other threads run later (Redis replies, single-flight hand-offs,
// polls for another replica's value, warm-up lookups) refer to this object; each request
// and warm-up round holds an InFlightGate pass until the last of them is gone, and Stop()
// closes the gate and waits for every pass, so the servable can be destroyed right after it
// returns (a reload or shutdown, with Redis work in flight).
//
// Thread-safety: Embed(), Admit() and Describe() are safe from any thread; Stop() once, from
// a thread that holds no pass (not from inside a callback of this servable).
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "cache/hot_key_tracker.h"
#include "common/in_flight_gate.h"
#include "core/batch_scheduler.h"
#include "core/embedding_cache.h"
#include "core/inference_api.h"
#include "core/latency_window.h"
#include "core/precision_controller.h"
#include "core/servable.h"
#include "core/servable_metrics.h"
#include "core/variant_selector.h"
#include "engine/model_config.h"
#include "engine/text_embedding_model.h"

namespace tailcut {

struct TextServableOptions {
  // With the cost-aware cut-off on (BatchSchedulerOptions::max_batch_micros, 10 ms): on QQP
  // questions of natural length it raised the rate held at P99 <= 86 ms on 2 slow cores from
  // 200-240 to 270 req/s, where 512-token batches of 70-75 ms had made the tail (BENCHMARKS.md,
  // "Tail latency on natural traffic").
  BatchSchedulerOptions scheduler = [] {
    BatchSchedulerOptions o;
    o.max_batch_micros = kDefaultMaxBatchMicros;
    return o;
  }();
  // Deadline for requests that bring none, from their arrival. Requests still queued when it
  // passes are answered 504 without running; 0 = no deadline.
  int64_t default_timeout_micros = 30'000'000;
  // Most inputs (texts) in one request; more is a 413.
  size_t max_inputs_per_request = 2048;
  // Admission by time rather than by count (BatchSchedulerOptions::max_queue_delay_micros,
  // which this sets): a request is refused (429) when the work ahead of it (the rest of the
  // running batch and the queued rows, at a per-batch plus per-token cost fitted to recent
  // batches, plus the measured margin by which rows waited longer than estimated) would take
  // longer than this before its first batch starts. An admitted request is answered within
  // about this plus its own batches, whatever the text lengths, and a request larger than
  // the queue bound is admitted too (its rows run in several batches); max_enqueued_rows
  // stays as a backstop. 0 = off.
  int64_t max_queue_delay_micros = kDefaultMaxQueueDelayMicros;
  // Which variant serves requests that pin none, under load (see precision_controller.h).
  PrecisionPolicy precision;
  // How often the controller looks at the load signals.
  int64_t precision_interval_micros = 1'000'000;
  // The window the controller's P99, rate and utilisation are computed over.
  int precision_window_seconds = 10;
  // Predictive warm-up (needs the cache): once per tracker bucket, the keys forecast to be
  // requested at least warmup_min_forecast times in the next bucket get their entries
  // refreshed when they would expire within warmup_refresh_horizon_micros: from Redis when
  // it holds them, else recomputed, but only while the model's queue is empty, so warm-up
  // never delays a client request.
  bool warmup = true;
  HotKeyTrackerOptions warmup_tracker;
  size_t warmup_max_keys = 256;
  int64_t warmup_min_forecast = 2;
  int64_t warmup_refresh_horizon_micros = 30'000'000;
  size_t warmup_max_recompute_per_bucket = 64;
  // Reference backfill: while the controller serves its fast variant, the inputs it
  // computes (those without a reference row) are remembered (up to
  // reference_backfill_max_keys), and in idle time their accurate rows are computed into
  // the accurate variant's cache entries; the controller
  // comes back only once none are owed (LoadSignals::reference_rows_owed). Without it every
  // hot input first seen on the fast variant would miss at the moment of switching back
  // (the fast variant's rows are never served then), and that burst sends the controller
  // straight back. Idle time means: nothing queued, and the workers busy less than
  // reference_backfill_below_utilization_percent of the last
  // reference_backfill_interval_micros; each such interval adds at most
  // reference_backfill_rows_per_round rows, which bounds what the backfill adds to a
  // client's wait to one small batch. 0 rows = off.
  size_t reference_backfill_max_keys = 8192;
  int64_t reference_backfill_interval_micros = 50'000;
  size_t reference_backfill_rows_per_round = 4;
  int64_t reference_backfill_below_utilization_percent = 50;
};

class TextEmbeddingServable final : public Servable {
 public:
  // `cache` may be null (no caching); it must outlive the servable.
  static Result<std::unique_ptr<TextEmbeddingServable>> Load(const ModelConfig& config,
                                                             const OnnxSessionOptions& session,
                                                             const TextServableOptions& options,
                                                             const ServableMetrics& metrics,
                                                             EmbeddingCache* cache,
                                                             const Clock& clock);
  ~TextEmbeddingServable() override;

  // A pass for one request, or null once Stop() has begun. A caller that picks this
  // servable under a lock that a reload swaps it under takes the pass under that lock too,
  // so the request is either admitted here or sees the new servable.
  InFlightGate::Pass Admit() { return gate_.Enter(); }
  // `pass` from Admit() (a null one is answered Unavailable).
  void Embed(EmbedRequest request, EmbedCallback done, InFlightGate::Pass pass);
  ModelDescription Describe() const override;
  // Refuses new requests, stops the controller and, once every admitted request has been
  // answered and nothing refers to this object any more, the worker. With drain, queued
  // items still run; without, they fail at once (Unavailable), which also ends the requests
  // waiting for them.
  void Stop(bool drain) override;

  const ModelConfig& config() const { return config_; }
  int64_t queued_rows() const override { return scheduler_->queued_rows(); }
  // Pins the variant for requests that pin none (admin), disabling the controller until
  // `name` is empty again. InvalidArgument naming the variants if unknown.
  Status SetActiveVariant(const std::string& name) override;

 private:
  struct Variant {
    VariantConfig config;
    std::unique_ptr<TextEmbeddingModel> model;  // Null when loading failed.
    std::string error;
    // Exponentially weighted inference cost, microseconds per padded token (x1000 fixed
    // point so it fits an atomic integer); 0 until the variant has run. The controller's
    // comparison of the variants (LoadSignals::accurate_slowdown).
    std::atomic<int64_t> nanos_per_token{0};
  };

  TextEmbeddingServable(const ModelConfig& config, const TextServableOptions& options,
                        const ServableMetrics& metrics, const Clock& clock);
  void ProcessBatch(Batch&& batch);
  // Queues items the model must compute (the cache's schedule step).
  Status ScheduleItems(
      const std::shared_ptr<EmbedJob>& job, int variant, bool normalize, int64_t deadline,
      std::vector<std::pair<EmbeddingCache::Item, std::optional<CacheTicket>>>&& items);
  // The background thread: precision controller ticks and warm-up rounds, each when due.
  void BackgroundLoop();
  void ControllerTick(int64_t* last_busy, int64_t* last_tick);
  void WarmupRound();
  // Queues one row of `variant` whose only effect is storing it under `key` (warm-up and
  // reference backfill).
  Status ScheduleCacheFill(const std::vector<int64_t>& ids, const CacheKey& key, int variant,
                           bool normalize);
  struct BackfillEntry {
    std::vector<int64_t> ids;
    CacheKey key;  // The accurate variant's key.
    bool normalize = true;
  };
  // Reference backfill (TextServableOptions): remembers inputs the fast variant computes
  // without a reference row; one round computes a few remembered ones with the accurate
  // variant.
  void RememberForBackfill(std::vector<BackfillEntry> entries);
  // `busy_micros` is the workers' busy time since the previous round.
  void BackfillRound(int64_t busy_micros, int64_t interval_micros);
  size_t ReferenceRowsOwed();
  // Batch workers: busy time is summed over them.
  int64_t Workers() const { return std::max(1, scheduler_->options().num_workers); }
  // At start-up: fills L1 with the entries the previous process persisted as hot.
  void LoadPersistedHotSet();
  std::string HotSetKey() const;

  const ModelConfig config_;
  const TextServableOptions options_;
  const ServableMetrics metrics_;
  const Clock& clock_;
  EmbeddingCache* cache_ = nullptr;
  uint32_t cache_tag_ = 0;
  std::string readout_;  // The model.yaml settings that shape vectors, for cache keys.
  std::vector<std::unique_ptr<Variant>> variants_;
  // Which variant serves (pins, the precision controller); its accurate() / fast() ends
  // also steer the cache's reference lookups and the backfill.
  std::unique_ptr<VariantSelector> selector_;
  std::unique_ptr<HotKeyTracker> tracker_;  // Null when warm-up is off.
  Family<Counter>* warmup_counter_ = nullptr;
  LatencyWindow latency_;
  std::atomic<int64_t> busy_micros_{0};  // Worker time spent in batches, ever.

  std::mutex backfill_mutex_;  // Guards backfill_ and backfill_keys_.
  std::deque<BackfillEntry> backfill_;
  std::unordered_set<CacheKey, CacheKeyHash> backfill_keys_;

  std::mutex controller_mutex_;
  std::condition_variable controller_wake_;
  bool controller_stop_ = false;
  std::thread background_thread_;
  std::unique_ptr<BatchScheduler> scheduler_;
  // Last: destroyed first, after Stop() has waited for every pass.
  InFlightGate gate_;
};

}  // namespace tailcut
