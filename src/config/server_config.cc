// The settings table: every setting of `tailcut serve`, one entry each, and the lookups and
// public queries (ConfigKeys, FormatConfigValue) over it. docs/configuration.md is generated
// from it (reference_markdown.cc).
#include "config/server_config.h"

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/settings.h"
#include "config/value_parsing.h"

namespace tailcut {
namespace config_internal {
namespace {

// ---------------------------------------------------------------------------------------------
// The table. Order is the reference's order. Descriptions are one line: what the setting does
// and what its special values mean; the why lives in the option structs' comments.

std::vector<Setting> BuildSettings() {
  std::vector<Setting> t;
  // server: the HTTP front door (HttpServerOptions) and process lifetime.
  t.push_back(Field(
                  "server.host", "Address to bind; 0.0.0.0 listens on every interface.",
                  [](auto& c) -> auto& { return c.http.host; })
                  .NonEmpty()
                  .Alias("--host"));
  t.push_back(Field(
                  "server.port", "TCP port; 0 picks a free one.",
                  [](auto& c) -> auto& { return c.http.port; })
                  .AtLeast(0)
                  .AtMost(65535)
                  .Alias("--port"));
  t.push_back(Field(
                  "server.grpc_port",
                  "TCP port for KServe v2 over gRPC (on server.host, Triton's 8001); 0 = none.",
                  [](auto& c) -> auto& { return c.grpc.port; })
                  .AtLeast(0)
                  .AtMost(65535)
                  .Alias("--grpc-port"));
  t.push_back(Field(
                  "server.io_threads",
                  "Threads that accept connections, read requests and write responses; 0 = one "
                  "per four CPUs (one to four).",
                  [](auto& c) -> auto& { return c.http.io_threads; })
                  .AtLeast(0));
  t.push_back(Field(
                  "server.work_threads",
                  "Threads that parse requests, tokenise and format responses (never on IO "
                  "threads); 0 = the CPUs the process may use, at least 2.",
                  [](auto& c) -> auto& { return c.work_pool.threads; })
                  .AtLeast(0));
  t.push_back(Field(
                  "server.max_queued_requests",
                  "Most requests waiting for a work thread; more get 503 with Retry-After.",
                  [](auto& c) -> auto& { return c.work_pool.max_queued_tasks; })
                  .AtLeast(1));
  t.push_back(Field(
                  "server.heavy_request_body_bytes",
                  "Requests with bodies this large or larger are parsed on the work pool's heavy "
                  "lane, which always leaves a thread to small requests.",
                  [](auto& c) -> auto& { return c.dispatch.heavy_body_bytes; })
                  .AtLeast(1));
  t.push_back(Field(
                  "server.max_body_bytes", "Largest request body; larger ones get 413.",
                  [](auto& c) -> auto& { return c.http.max_body_bytes; })
                  .AtLeast(1));
  t.push_back(Field(
                  "server.max_in_flight_body_bytes",
                  "Most request body bytes held at once across connections; requests that would "
                  "exceed it get 429. At least server.max_body_bytes.",
                  [](auto& c) -> auto& { return c.http.max_in_flight_body_bytes; })
                  .AtLeast(1));
  // The HTTP parser takes a 32-bit header limit.
  t.push_back(Field(
                  "server.max_header_bytes", "Largest request header block; larger ones get 431.",
                  [](auto& c) -> auto& { return c.http.max_header_bytes; })
                  .AtLeast(1)
                  .AtMost(std::numeric_limits<uint32_t>::max()));
  t.push_back(Field(
                  "server.header_timeout_millis",
                  "Time for a request's headers to arrive, from a new connection's accept or a "
                  "kept-alive one's first byte (slow-client guard).",
                  [](auto& c) -> auto& { return c.http.header_timeout_millis; })
                  .AtLeast(1));
  t.push_back(Field(
                  "server.body_timeout_millis",
                  "Time for a request body to arrive once its headers are in.",
                  [](auto& c) -> auto& { return c.http.body_timeout_millis; })
                  .AtLeast(1));
  t.push_back(Field(
                  "server.idle_timeout_millis",
                  "How long a keep-alive connection may sit idle between requests.",
                  [](auto& c) -> auto& { return c.http.idle_timeout_millis; })
                  .AtLeast(1));
  t.push_back(Field(
                  "server.write_timeout_millis", "Time allowed to write a response.",
                  [](auto& c) -> auto& { return c.http.write_timeout_millis; })
                  .AtLeast(1));
  t.push_back(Field(
                  "server.max_stream_buffer_bytes",
                  "Most bytes of one streamed response (server-sent events) queued for a client "
                  "that reads slower than they are produced; past it the connection is closed "
                  "and the request cancelled.",
                  [](auto& c) -> auto& { return c.http.max_stream_buffer_bytes; })
                  .AtLeast(1));
  t.push_back(Field(
                  "server.max_connections",
                  "Most open connections; further ones are closed at once.",
                  [](auto& c) -> auto& { return c.http.max_connections; })
                  .AtLeast(1));
  t.push_back(Field(
                  "server.shutdown_grace_millis",
                  "How long SIGTERM waits for in-flight requests before closing connections.",
                  [](auto& c) -> auto& { return c.shutdown_grace_millis; })
                  .AtLeast(0));
  t.push_back(Field(
                  "server.shutdown_delay_millis",
                  "After SIGTERM, how long new connections are still served before the listener "
                  "closes.",
                  [](auto& c) -> auto& { return c.shutdown_delay_millis; })
                  .AtLeast(0));

  // auth: API keys, admin keys, rate limits (AuthOptions).
  t.push_back(Field(
      "auth.api_keys_file",
      "File of API keys, one per line: '<key> [<requests per second>]'. With any "
      "API key configured, inference routes need 'Authorization: Bearer <key>'.",
      [](auto& c) -> auto& { return c.auth.api_keys_file; }));
  t.push_back(Field(
      "auth.api_keys",
      "More API keys, comma-separated (set it as TAILCUT_AUTH_API_KEYS, not a flag).",
      [](auto& c) -> auto& { return c.auth.api_keys; }));
  t.push_back(Field(
      "auth.admin_keys",
      "Keys for the /admin routes, comma-separated; without any they are refused.",
      [](auto& c) -> auto& { return c.auth.admin_keys; }));
  t.push_back(Field(
                  "auth.rate_limit_per_s",
                  "Default per-key request rate limit (requests/s); 0 = unlimited.",
                  [](auto& c) -> auto& { return c.auth.rate_limit_per_s; })
                  .AtLeast(0));
  t.push_back(Field(
      "auth.public_health", "Health routes need no key even when keys are set.",
      [](auto& c) -> auto& { return c.auth.public_health; }));
  t.push_back(Field(
      "auth.public_metrics", "/metrics needs no key even when keys are set.",
      [](auto& c) -> auto& { return c.auth.public_metrics; }));

  // models: the repository (InferenceServiceOptions).
  t.push_back(Field(
                  "models.repository", "Folder holding one sub-folder per model.",
                  [](auto& c) -> auto& { return c.service.model_repository; })
                  .NonEmpty()
                  .Alias("--model-repository"));
  t.push_back(Field(
                  "models.default",
                  "Model used by requests that name none; empty = the first text-embedding "
                  "model by folder name.",
                  [](auto& c) -> auto& { return c.service.default_model; })
                  .Alias("--default-model"));
  t.push_back(Field(
      "models.lazy_loading", "Load each model on its first request instead of at start-up.",
      [](auto& c) -> auto& { return c.service.lazy_loading; }));

  // engine: ONNX Runtime's shared thread pools (OrtEnvironmentOptions) and per-session
  // options (OnnxSessionOptions, the same for every model).
  t.push_back(Field(
                  "engine.intra_op_threads",
                  "Threads one inference may use (shared by all models); 0 = CPUs / batch "
                  "workers (1 when both are 0).",
                  [](auto& c) -> auto& { return c.engine.intra_op_threads; })
                  .AtLeast(0)
                  .Alias("--threads"));
  t.push_back(Field(
                  "engine.inter_op_threads",
                  "Threads for independent graph branches; 1 suits chain-shaped encoders.",
                  [](auto& c) -> auto& { return c.engine.inter_op_threads; })
                  .AtLeast(1));
  t.push_back(Field(
      "engine.allow_spinning",
      "Let pool threads spin between batches: lower wake-up latency, busier cores.",
      [](auto& c) -> auto& { return c.engine.allow_spinning; }));
  t.push_back(Field(
                  "engine.log_severity", "ONNX Runtime's log threshold: 0 verbose .. 4 fatal.",
                  [](auto& c) -> auto& { return c.engine.log_severity; })
                  .AtLeast(0)
                  .AtMost(4));
  t.push_back(Field(
                  "engine.graph_optimization_level",
                  "Graph optimisations at load: 0 none, 1 basic, 2 extended, 99 all.",
                  [](auto& c) -> auto& { return c.service.session.graph_optimization_level; })
                  .OneOf({"0", "1", "2", "99"}));
  t.push_back(Field(
      "engine.enable_memory_pattern", "Reuse allocation plans between runs of identical shapes.",
      [](auto& c) -> auto& { return c.service.session.enable_memory_pattern; }));
  t.push_back(Field(
      "engine.enable_cpu_arena",
      "Keep freed tensor memory for reuse (less jitter, memory held at peak).",
      [](auto& c) -> auto& { return c.service.session.enable_cpu_arena; }));

  // batching: every model's batch queue. Text and tensor servables get the same values.
  t.push_back(Field(
                  "batching.max_batch_size",
                  "Most rows in one batch; a model's own max_batch_size caps it further.",
                  [](auto& c) -> auto& { return c.service.text.scheduler.queue.max_batch_size; },
                  [](auto& c) -> auto& { return c.service.tensor.scheduler.queue.max_batch_size; })
                  .AtLeast(1)
                  .Alias("--max-batch-size"));
  // Tensor servables batch by rows only and ignore a token bound, so it is set for text only.
  t.push_back(Field(
                  "batching.max_batch_tokens",
                  "Most padded tokens (rows x longest) in one text batch; 0 = no limit.",
                  [](auto& c) -> auto& { return c.service.text.scheduler.queue.max_batch_tokens; })
                  .AtLeast(0));
  t.push_back(Bind(
                  "batching.max_batch_millis",
                  "Longest a batch may be predicted to run (cost fitted to recent batches): "
                  "formation stops adding rows before it; 0 = no time bound.",
                  1000, [](auto& c) -> auto& { return c.service.text.scheduler.max_batch_micros; },
                  [](auto& c) -> auto& { return c.service.tensor.scheduler.max_batch_micros; })
                  .AtLeast(0));
  t.push_back(
      Field(
          "batching.batch_timeout_micros",
          "How long the oldest request may wait for its batch to fill; 0 = run at "
          "once.",
          [](auto& c) -> auto& { return c.service.text.scheduler.queue.batch_timeout_micros; },
          [](auto& c) -> auto& { return c.service.tensor.scheduler.queue.batch_timeout_micros; })
          .AtLeast(0)
          .Alias("--batch-timeout-micros"));
  t.push_back(
      Field(
          "batching.max_enqueued_rows",
          "Queue bound in rows per model: a request gets 429 when the rows queued ahead of it "
          "plus its first batch would pass it.",
          [](auto& c) -> auto& { return c.service.text.scheduler.queue.max_enqueued_rows; },
          [](auto& c) -> auto& { return c.service.tensor.scheduler.queue.max_enqueued_rows; })
          .AtLeast(1)
          .Alias("--max-queue"));
  t.push_back(Field(
                  "batching.grouping_window",
                  "Queued requests considered when grouping a batch by length.",
                  [](auto& c) -> auto& { return c.service.text.scheduler.queue.grouping_window; },
                  [](auto& c) -> auto& { return c.service.tensor.scheduler.queue.grouping_window; })
                  .AtLeast(1));
  t.push_back(Field(
                  "batching.num_workers",
                  "Threads per model that run batches; 0 = CPUs / engine.intra_op_threads "
                  "(one per CPU when both are 0).",
                  [](auto& c) -> auto& { return c.service.text.scheduler.num_workers; },
                  [](auto& c) -> auto& { return c.service.tensor.scheduler.num_workers; })
                  .AtLeast(0));
  t.push_back(
      Field(
          "batching.initial_batch_estimate_micros",
          "Guess of one batch's run time for deadline decisions until batches are "
          "measured.",
          [](auto& c) -> auto& { return c.service.text.scheduler.initial_batch_estimate_micros; },
          [](auto& c) -> auto& { return c.service.tensor.scheduler.initial_batch_estimate_micros; })
          .AtLeast(0));

  // requests: per-request limits. The servables keep microseconds; people think in millis.
  t.push_back(Bind(
                  "requests.default_timeout_millis",
                  "Deadline of requests that bring none, from arrival; 0 = none.", 1000,
                  [](auto& c) -> auto& { return c.service.text.default_timeout_micros; },
                  [](auto& c) -> auto& { return c.service.tensor.default_timeout_micros; })
                  .AtLeast(0));
  t.push_back(
      Bind(
          "requests.max_queue_delay_millis",
          "Refuse (429) a request when the work ahead of it (the running batch's rest "
          "and the queued rows, at the batch cost fitted to recent batches, plus the "
          "measured margin of waits over estimates) would take longer than this before "
          "its first batch; 0 = off.",
          1000, [](auto& c) -> auto& { return c.service.text.max_queue_delay_micros; },
          [](auto& c) -> auto& { return c.service.tensor.scheduler.max_queue_delay_micros; })
          .AtLeast(0));
  t.push_back(Field(
                  "requests.max_inputs_per_request",
                  "Most texts in one embedding request; more get 413.",
                  [](auto& c) -> auto& { return c.service.text.max_inputs_per_request; })
                  .AtLeast(1));

  // cache: the embedding cache hierarchy (L1CacheOptions, EmbeddingCacheOptions).
  t.push_back(Field(
      "cache.enabled",
      "Cache embeddings in process (L1). Single-flight and Redis (if enabled) still work "
      "without it.",
      [](auto& c) -> auto& { return c.service.cache_enabled; }));
  t.push_back(Field(
                  "cache.l1_capacity_bytes", "Bytes the in-process cache may hold.",
                  [](auto& c) -> auto& { return c.service.l1.capacity_bytes; })
                  .AtLeast(1));
  t.push_back(Bind(
                  "cache.l1_ttl_seconds", "How long an L1 entry stays valid; 0 = no expiry.",
                  1'000'000, [](auto& c) -> auto& { return c.service.l1.ttl_micros; })
                  .AtLeast(0));
  t.push_back(Field(
                  "cache.l1_shards", "Lock stripes of the in-process cache.",
                  [](auto& c) -> auto& { return c.service.l1.shards; })
                  .AtLeast(1)
                  .AtMost(1024));
  t.push_back(Field(
      "cache.l1_admission_filter",
      "W-TinyLFU admission (resists one-hit wonders); false = plain segmented LRU.",
      [](auto& c) -> auto& { return c.service.l1.admission_filter; }));
  t.push_back(Field(
      "cache.single_flight", "Identical concurrent misses in this process share one computation.",
      [](auto& c) -> auto& { return c.service.cache.single_flight; }));
  t.push_back(Field(
      "cache.distributed_single_flight",
      "With Redis: one replica computes a missing key, the others wait for it.",
      [](auto& c) -> auto& { return c.service.cache.distributed_single_flight; }));
  t.push_back(Field(
                  "cache.lock_ttl_millis",
                  "Expiry of the cross-replica computation lock (bounds waits on a dead holder).",
                  [](auto& c) -> auto& { return c.service.cache.lock_ttl_millis; })
                  .AtLeast(1));
  t.push_back(Field(
                  "cache.remote_wait_millis",
                  "How long a replica waits for another's computation before computing itself.",
                  [](auto& c) -> auto& { return c.service.cache.remote_wait_millis; })
                  .AtLeast(0));
  t.push_back(Field(
                  "cache.remote_poll_millis", "How often a waiting replica polls Redis.",
                  [](auto& c) -> auto& { return c.service.cache.remote_poll_millis; })
                  .AtLeast(1));

  t.push_back(Field(
      "cache.warmup",
      "Predictive warm-up: refresh entries of keys forecast to stay hot before "
      "they expire.",
      [](auto& c) -> auto& { return c.service.text.warmup; }));
  t.push_back(Bind(
                  "cache.warmup_bucket_seconds",
                  "Forecasting step: counts per key per bucket; warm-up runs once per bucket.",
                  1'000'000,
                  [](auto& c) -> auto& { return c.service.text.warmup_tracker.bucket_micros; })
                  .AtLeast(1));
  t.push_back(Field(
                  "cache.warmup_tracked_keys", "Keys whose request counts are tracked at most.",
                  [](auto& c) -> auto& { return c.service.text.warmup_tracker.max_tracked_keys; })
                  .AtLeast(8));
  t.push_back(Field(
                  "cache.warmup_max_keys", "Hottest forecast keys considered per round.",
                  [](auto& c) -> auto& { return c.service.text.warmup_max_keys; })
                  .AtLeast(1));
  t.push_back(Field(
                  "cache.warmup_min_forecast",
                  "Requests a key must be forecast to get in the next bucket to be warmed.",
                  [](auto& c) -> auto& { return c.service.text.warmup_min_forecast; })
                  .AtLeast(0));
  t.push_back(Bind(
                  "cache.warmup_refresh_horizon_seconds",
                  "Warm entries that would expire within this long (or are missing).", 1'000'000,
                  [](auto& c) -> auto& { return c.service.text.warmup_refresh_horizon_micros; })
                  .AtLeast(0));
  t.push_back(Field(
                  "cache.warmup_max_recompute_per_bucket",
                  "Model runs warm-up may cause per round (only while the queue is empty).",
                  [](auto& c) -> auto& { return c.service.text.warmup_max_recompute_per_bucket; })
                  .AtLeast(0));

  // semantic_cache: generated answers reused for the same question (SemanticCacheOptions).
  t.push_back(Field(
      "semantic.enabled",
      "Answer generation requests from cached answers to the same question "
      "(deterministic requests only, unless cache_sampling_requests).",
      [](auto& c) -> auto& { return c.service.semantic_cache.enabled; }));
  t.push_back(
      Field(
          "semantic.policy",
          "How a cached query is judged the same question: verifier (trained pair "
          "classifier at the max_wrong_hits_per_mille bound), reranker (a cross-encoder "
          "reads both texts, at that bound: fewer wrong hits, one model pass more per lookup), "
          "cosine (min_cosine_per_mille alone), exact (identical text only).",
          [](auto& c) -> auto& { return c.service.semantic_cache.policy; })
          .OneOf({"verifier", "reranker", "cosine", "exact"}));
  t.push_back(Field(
      "semantic.embedding_model",
      "Text-embedding model that embeds queries; empty = the default one.",
      [](auto& c) -> auto& { return c.service.semantic_cache.embedding_model; }));
  t.push_back(Field(
      "semantic.embedding_variant",
      "Precision variant of that model that embeds queries; empty = the one the "
      "verifier or reranker policy was measured on, else the model's default.",
      [](auto& c) -> auto& { return c.service.semantic_cache.embedding_variant; }));
  t.push_back(Field(
      "semantic.reranker_model",
      "Reranker policy: the reranker model (its folder holds "
      "semantic_operating_points.json); empty = the repository's first reranker.",
      [](auto& c) -> auto& { return c.service.semantic_cache.reranker_model; }));
  t.push_back(
      Field(
          "semantic.max_wrong_hits_per_mille",
          "Verifier and reranker policies: the share of hits that may be wrong (per thousand, "
          "as measured on held-out labelled question pairs); 0 = the policy's default.",
          [](auto& c) -> auto& { return c.service.semantic_cache.max_wrong_hits_per_mille; })
          .AtLeast(0)
          .AtMost(1000));
  t.push_back(Field(
                  "semantic.min_cosine_per_mille",
                  "Cosine policy: the threshold (per thousand). Verifier policy: candidates "
                  "below it are not scored (the reranker policy uses its own measured floor).",
                  [](auto& c) -> auto& { return c.service.semantic_cache.min_cosine_per_mille; })
                  .AtLeast(0)
                  .AtMost(1000));
  t.push_back(Field(
                  "semantic.candidates", "Nearest cached queries scored per lookup.",
                  [](auto& c) -> auto& { return c.service.semantic_cache.candidates; })
                  .AtLeast(1)
                  .AtMost(64));
  t.push_back(Field(
                  "semantic.reranker_candidates",
                  "Reranker policy: of those, the nearest scored by the reranker (one model "
                  "pair each, milliseconds apiece); its operating points were measured with 1.",
                  [](auto& c) -> auto& { return c.service.semantic_cache.reranker_candidates; })
                  .AtLeast(1)
                  .AtMost(64));
  t.push_back(Field(
      "semantic.cache_sampling_requests",
      "Also cache requests that sample (temperature > 0 without a seed).",
      [](auto& c) -> auto& { return c.service.semantic_cache.cache_sampling_requests; }));
  t.push_back(Field(
                  "semantic.max_answer_bytes", "Longest answer text stored.",
                  [](auto& c) -> auto& { return c.service.semantic_cache.max_answer_bytes; })
                  .AtLeast(1));
  t.push_back(Field(
                  "semantic.capacity_bytes",
                  "Bytes the in-process semantic cache may hold (least recently used go first).",
                  [](auto& c) -> auto& { return c.service.semantic_cache.store.capacity_bytes; })
                  .AtLeast(1));
  t.push_back(Bind(
                  "semantic.ttl_seconds", "How long a cached answer may be served; 0 = no expiry.",
                  1'000'000,
                  [](auto& c) -> auto& { return c.service.semantic_cache.store.ttl_micros; })
                  .AtLeast(0));

  t.push_back(Field(
      "semantic.share_through_redis",
      "With redis.enabled: replicas share cached answers through a Redis stream.",
      [](auto& c) -> auto& { return c.service.semantic_sync.enabled; }));
  t.push_back(Field(
                  "semantic.redis_poll_millis",
                  "How often a replica reads answers other replicas added (the longest one "
                  "goes unseen here).",
                  [](auto& c) -> auto& { return c.service.semantic_sync.poll_millis; })
                  .AtLeast(1));
  t.push_back(Field(
                  "semantic.redis_max_entries",
                  "About how many answers the shared Redis stream keeps (older ones are trimmed).",
                  [](auto& c) -> auto& { return c.service.semantic_sync.max_log_entries; })
                  .AtLeast(1));

  // redis: the shared L2 tier (RedisOptions); off unless redis.enabled.
  t.push_back(Field(
      "redis.enabled", "Use Redis as the shared L2 cache tier.",
      [](auto& c) -> auto& { return c.service.redis_enabled; }));
  t.push_back(
      Field(
          "redis.host", "Redis address.", [](auto& c) -> auto& { return c.service.redis.host; })
          .NonEmpty());
  t.push_back(
      Field(
          "redis.port", "Redis port.", [](auto& c) -> auto& { return c.service.redis.port; })
          .AtLeast(1)
          .AtMost(65535));
  t.push_back(Field(
      "redis.username", "ACL user; empty = the default user.",
      [](auto& c) -> auto& { return c.service.redis.username; }));
  t.push_back(Field(
      "redis.password", "Password (AUTH); never logged. Prefer TAILCUT_REDIS_PASSWORD to a flag.",
      [](auto& c) -> auto& { return c.service.redis.password; }));
  t.push_back(Field(
                  "redis.db", "Logical database (SELECT).",
                  [](auto& c) -> auto& { return c.service.redis.db; })
                  .AtLeast(0));
  t.push_back(Field(
                  "redis.key_prefix", "Namespace of every key; one per deployment.",
                  [](auto& c) -> auto& { return c.service.redis.key_prefix; })
                  .NonEmpty());
  t.push_back(Field(
                  "redis.connect_timeout_millis", "Bound on one connection attempt.",
                  [](auto& c) -> auto& { return c.service.redis.connect_timeout_millis; })
                  .AtLeast(1));
  t.push_back(Field(
                  "redis.command_timeout_millis",
                  "Bound on one command, queueing included; keep it below a batch's latency.",
                  [](auto& c) -> auto& { return c.service.redis.command_timeout_millis; })
                  .AtLeast(1));
  t.push_back(Field(
                  "redis.entry_ttl_seconds", "Expiry of embeddings stored in Redis.",
                  [](auto& c) -> auto& { return c.service.redis.entry_ttl_seconds; })
                  .AtLeast(1));
  t.push_back(Field(
                  "redis.max_queued_commands",
                  "Commands waiting for Redis beyond which calls fail at once.",
                  [](auto& c) -> auto& { return c.service.redis.max_queued_commands; })
                  .AtLeast(1));
  t.push_back(Field(
                  "redis.breaker_failure_threshold",
                  "Consecutive failed round trips that open the circuit (Redis bypassed).",
                  [](auto& c) -> auto& { return c.service.redis.breaker_failure_threshold; })
                  .AtLeast(1));
  t.push_back(Field(
                  "redis.breaker_open_millis", "How long the circuit stays open before a probe.",
                  [](auto& c) -> auto& { return c.service.redis.breaker_open_millis; })
                  .AtLeast(1));
  t.push_back(Field(
      "redis.cluster_nodes",
      "Redis Cluster seed nodes, host:port,host:port (the rest are discovered); "
      "empty = standalone Redis at redis.host:redis.port. Needs redis.db 0.",
      [](auto& c) -> auto& { return c.service.redis.cluster_nodes; }));
  t.push_back(Field(
                  "redis.cluster_topology_refresh_millis",
                  "Cluster: how often the slot map is fetched again while in use (MOVED and "
                  "failing nodes refresh it sooner).",
                  [](auto& c) -> auto& { return c.service.redis.cluster_topology_refresh_millis; })
                  .AtLeast(1));

  // precision: which variant serves requests that pin none (PrecisionPolicy).
  t.push_back(Field(
                  "precision.mode",
                  "Variant controller: slo (switch to the fast variant near the SLO), thresholds "
                  "(rate and memory rule), off.",
                  [](auto& c) -> auto& { return c.service.text.precision.mode; })
                  .OneOf({"slo", "thresholds", "off"}));
  t.push_back(Field(
                  "precision.accurate_variant",
                  "Variant (or precision alias) served with headroom.",
                  [](auto& c) -> auto& { return c.service.text.precision.accurate_variant; })
                  .NonEmpty());
  t.push_back(Field(
                  "precision.fast_variant",
                  "Variant (or precision alias) served under pressure; only an interchangeable "
                  "one (batch-invariant, fidelity at the floor) is used.",
                  [](auto& c) -> auto& { return c.service.text.precision.fast_variant; })
                  .NonEmpty());
  t.push_back(Field(
                  "precision.min_fidelity_cosine_ppm",
                  "Floor on a fast variant's measured min cosine to fp32 (model.yaml), in "
                  "millionths.",
                  [](auto& c) -> auto& { return c.service.text.precision.min_fidelity_cosine_ppm; })
                  .AtLeast(0)
                  .AtMost(1'000'000));
  t.push_back(
      Field(
          "precision.min_fidelity_recall_at_10_ppm",
          "Floor on a fast variant's measured recall@10 against fp32, in millionths.",
          [](auto& c) -> auto& { return c.service.text.precision.min_fidelity_recall_at_10_ppm; })
          .AtLeast(0)
          .AtMost(1'000'000));
  t.push_back(Field(
                  "precision.min_top1_agreement_ppm",
                  "Classifiers: floor on a fast variant's measured share of check images whose "
                  "top-1 class equals fp32's (model.yaml top1_agreement), in millionths.",
                  [](auto& c) -> auto& { return c.service.text.precision.min_top1_agreement_ppm; })
                  .AtLeast(0)
                  .AtMost(1'000'000));
  t.push_back(Field(
      "precision.allow_below_fidelity_floor",
      "Opt in to switching to a batch-invariant variant under the fidelity floor or unmeasured.",
      [](auto& c) -> auto& { return c.service.text.precision.allow_below_fidelity_floor; }));
  t.push_back(Bind(
                  "precision.slo_p99_millis", "The latency objective the slo mode protects.", 1000,
                  [](auto& c) -> auto& { return c.service.text.precision.slo_p99_micros; })
                  .AtLeast(1));
  t.push_back(Field(
                  "precision.degrade_at_slo_percent",
                  "slo: switch to the fast variant when P99 reaches this share of the SLO.",
                  [](auto& c) -> auto& { return c.service.text.precision.degrade_at_slo_percent; })
                  .AtLeast(1)
                  .AtMost(1000));
  t.push_back(
      Field(
          "precision.restore_below_slo_percent",
          "slo: return when the accurate variant's predicted P99 is under this share.",
          [](auto& c) -> auto& { return c.service.text.precision.restore_below_slo_percent; })
          .AtLeast(1)
          .AtMost(1000));
  t.push_back(
      Field(
          "precision.degrade_at_utilization_percent",
          "slo: switch to the fast variant when the inference worker is this busy.",
          [](auto& c) -> auto& { return c.service.text.precision.degrade_at_utilization_percent; })
          .AtLeast(1)
          .AtMost(100));
  t.push_back(Field(
                  "precision.restore_below_utilization_percent",
                  "slo: return when the accurate variant's predicted utilisation is under this.",
                  [](auto& c) -> auto& {
                    return c.service.text.precision.restore_below_utilization_percent;
                  })
                  .AtLeast(1)
                  .AtMost(100));
  t.push_back(Field(
                  "precision.min_samples", "slo: requests needed before a P99 is trusted.",
                  [](auto& c) -> auto& { return c.service.text.precision.min_samples; })
                  .AtLeast(1));
  t.push_back(Field(
                  "precision.fast_at_rate_per_s",
                  "thresholds: rate (requests/s) at or above which the fast variant may serve.",
                  [](auto& c) -> auto& { return c.service.text.precision.fast_at_rate_per_s; })
                  .AtLeast(0));
  t.push_back(
      Field(
          "precision.fast_at_memory_used_percent",
          "thresholds: memory use above which (with the rate) the fast variant serves.",
          [](auto& c) -> auto& { return c.service.text.precision.fast_at_memory_used_percent; })
          .AtLeast(0)
          .AtMost(100));
  t.push_back(Field(
                  "precision.accurate_at_rate_per_s",
                  "thresholds: rate at or below which the accurate variant may return.",
                  [](auto& c) -> auto& { return c.service.text.precision.accurate_at_rate_per_s; })
                  .AtLeast(0));
  t.push_back(
      Field(
          "precision.accurate_at_memory_free_bytes",
          "thresholds: free memory needed (with the rate) to return to the accurate one.",
          [](auto& c) -> auto& { return c.service.text.precision.accurate_at_memory_free_bytes; })
          .AtLeast(0));
  t.push_back(Bind(
                  "precision.min_dwell_millis",
                  "No switch sooner than this after the previous one (anti-flapping).", 1000,
                  [](auto& c) -> auto& { return c.service.text.precision.min_dwell_micros; })
                  .AtLeast(0));
  t.push_back(Field(
                  "precision.reference_backfill_max_keys",
                  "Inputs computed by the fast variant remembered to get accurate rows in "
                  "idle time; the controller returns only once none are owed. 0 = off.",
                  [](auto& c) -> auto& { return c.service.text.reference_backfill_max_keys; })
                  .AtLeast(0));
  t.push_back(Field(
                  "precision.reference_backfill_rows_per_round",
                  "Accurate rows the backfill adds per idle 50 ms (bounds its cost to a client).",
                  [](auto& c) -> auto& { return c.service.text.reference_backfill_rows_per_round; })
                  .AtLeast(0));
  t.push_back(Bind(
                  "precision.interval_millis", "How often the controller evaluates the load.", 1000,
                  [](auto& c) -> auto& { return c.service.text.precision_interval_micros; })
                  .AtLeast(1));
  t.push_back(Field(
                  "precision.window_seconds",
                  "Window over which P99, rate and utilisation are measured.",
                  [](auto& c) -> auto& { return c.service.text.precision_window_seconds; })
                  .AtLeast(1)
                  .AtMost(3600));

  // log
  t.push_back(Field(
                  "log.level", "Log threshold.", [](auto& c) -> auto& { return c.log_level; })
                  .OneOf({"trace", "debug", "info", "warn", "error"}));
  t.push_back(Field(
                  "log.slow_request_millis",
                  "Log requests slower than this with their stage breakdown; 0 = none.",
                  [](auto& c) -> auto& { return c.slow_request_log_millis; })
                  .AtLeast(0));
  // tracing: OpenTelemetry spans over OTLP/HTTP (TraceExporterOptions).
  t.push_back(Field(
      "tracing.otlp_endpoint",
      "Collector URL for OTLP/HTTP protobuf traces, e.g. http://127.0.0.1:4318/v1/traces; empty "
      "= no tracing.",
      [](auto& c) -> auto& { return c.tracing.otlp_endpoint; }));
  t.push_back(Field(
                  "tracing.sample_ppm",
                  "Traces started here that are exported, per million requests (a caller's "
                  "sampled traceparent is always followed).",
                  [](auto& c) -> auto& { return c.tracing.sample_ppm; })
                  .AtLeast(0)
                  .AtMost(1'000'000));
  t.push_back(Field(
                  "tracing.service_name", "service.name of the exported spans.",
                  [](auto& c) -> auto& { return c.tracing.service_name; })
                  .NonEmpty());
  t.push_back(Field(
                  "tracing.max_queue_spans",
                  "Spans held for export at most; more are dropped (and counted).",
                  [](auto& c) -> auto& { return c.tracing.max_queue_spans; })
                  .AtLeast(1));
  t.push_back(Field(
                  "tracing.batch_timeout_millis",
                  "Longest a span waits for its batch to fill before it is sent.",
                  [](auto& c) -> auto& { return c.tracing.batch_timeout_millis; })
                  .AtLeast(1));
  return t;
}

}  // namespace

const std::vector<Setting>& Settings() {
  static const std::vector<Setting> settings = BuildSettings();
  return settings;
}

// One line per section, in the reference above the section's table.
const std::vector<std::pair<std::string, std::string>>& Sections() {
  static const std::vector<std::pair<std::string, std::string>> sections = {
      {"server", "The HTTP front door. Its limits are enforced before any handler runs."},
      {"auth",
       "Access control. Keys are compared in constant time and never logged. Admin routes "
       "always need an admin key."},
      {"models", "The model repository: one folder per model, each with its model.yaml."},
      {"engine",
       "ONNX Runtime. One pair of thread pools is shared by every model, so several models "
       "do not oversubscribe the cores."},
      {"batching", "Every model's batch queue (text and tensor models alike, except where noted)."},
      {"requests", "Limits and defaults for each request."},
      {"cache", "The embedding cache in front of every text model: in-process L1, single-flight."},
      {"semantic",
       "Generated answers reused for requests that ask the same question (generation only): "
       "looked up before a request is queued, by exact text and by meaning; shared through "
       "Redis when it is enabled."},
      {"redis",
       "Redis as the shared L2 tier. Optional: without it the server runs on L1 alone. Its "
       "failures never fail requests: a circuit breaker bypasses it."},
      {"precision",
       "Which precision variant serves requests that pin none. The controller only runs for "
       "models with both the accurate and the fast variant loaded."},
      {"log", "Logging."},
      {"tracing",
       "OpenTelemetry traces: a span per request with a child per stage, exported in batches "
       "on a thread of its own; a collector that is down costs dropped spans, never requests."},
  };
  return sections;
}

const Setting* FindSetting(std::string_view key) {
  for (const auto& s : Settings()) {
    if (s.key == key) return &s;
  }
  return nullptr;
}

bool IsSection(std::string_view path) {
  for (const auto& s : Settings()) {
    if (s.key.size() > path.size() && s.key.compare(0, path.size(), path) == 0 &&
        s.key[path.size()] == '.') {
      return true;
    }
  }
  return false;
}

// For tests: whether every setting's fields agree in a default-constructed ServerConfig, so
// the reference's single Default per key is true of all of them. Returns the first key whose
// fields disagree, or empty.
std::string FirstInconsistentDefault() {
  const ServerConfig defaults;
  for (const auto& s : Settings()) {
    if (!s.consistent(defaults)) return s.key;
  }
  return "";
}

}  // namespace config_internal

using config_internal::FindSetting;
using config_internal::FormatValue;
using config_internal::Setting;
using config_internal::Settings;
using config_internal::Value;

std::vector<std::string> ConfigKeys() {
  std::vector<std::string> keys;
  for (const auto& s : Settings()) keys.push_back(s.key);
  return keys;
}

std::optional<std::string> FormatConfigValue(const ServerConfig& config, std::string_view key) {
  const Setting* s = FindSetting(key);
  if (s == nullptr) return std::nullopt;
  // Secrets are never printed, not even in an effective-configuration dump.
  if (key.ends_with("password") || key.ends_with("_keys"))
    return std::string(s->get(config) == Value(std::string()) ? "" : "***");
  return FormatValue(s->get(config));
}

}  // namespace tailcut
