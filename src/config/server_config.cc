#include "config/server_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <set>
#include <sstream>
#include <type_traits>
#include <utility>
#include <variant>

extern char** environ;  // POSIX; declared here so no feature-test macro is needed.

namespace tailcut {
namespace {

// ---------------------------------------------------------------------------------------------
// The settings table's building blocks.

enum class Kind { kInt, kBool, kString };

// A parsed value, before it is stored in its field(s). Integers travel as int64_t in the
// setting's own unit (the key's: requests.default_timeout_millis carries milliseconds).
using Value = std::variant<int64_t, bool, std::string>;

constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

struct Setting {
  std::string key;
  Kind kind = Kind::kString;
  std::string description;
  std::string alias;  // A short flag ("--port"), or empty.
  // Integers: the accepted range. It starts as what the field's type can hold (divided by
  // the unit scale) and is narrowed by AtLeast()/AtMost(); the explicit flags record which
  // bounds are the setting's own, for the reference's Type column.
  int64_t min = kInt64Min;
  int64_t max = kInt64Max;
  bool explicit_min = false;
  bool explicit_max = false;
  // Closed set of accepted values (matched case-insensitively, stored as listed); empty = any.
  std::vector<std::string> choices;
  bool non_empty = false;  // Strings: "" is refused.

  std::function<void(ServerConfig&, const Value&)> set;
  std::function<Value(const ServerConfig&)> get;
  // False when the fields a setting writes (text and tensor servables, say) hold different
  // values, in which case get() could not name "the" default. Checked by a test.
  std::function<bool(const ServerConfig&)> consistent;

  Setting&& Alias(std::string flag) && {
    alias = std::move(flag);
    return std::move(*this);
  }
  Setting&& AtLeast(int64_t v) && {
    min = std::max(min, v);
    explicit_min = true;
    return std::move(*this);
  }
  Setting&& AtMost(int64_t v) && {
    max = std::min(max, v);
    explicit_max = true;
    return std::move(*this);
  }
  Setting&& OneOf(std::vector<std::string> values) && {
    choices = std::move(values);
    return std::move(*this);
  }
  Setting&& NonEmpty() && {
    non_empty = true;
    return std::move(*this);
  }
};

template <typename F>
Value ReadField(const F& field, int64_t scale) {
  if constexpr (std::is_same_v<F, bool> || std::is_same_v<F, std::string>) {
    return field;
  } else {
    return static_cast<int64_t>(field) / scale;
  }
}

template <typename F>
void StoreField(F& field, const Value& value, int64_t scale) {
  if constexpr (std::is_same_v<F, bool> || std::is_same_v<F, std::string>) {
    field = std::get<F>(value);
  } else {
    // In range by construction: the setting's bounds are the field type's divided by scale.
    field = static_cast<F>(std::get<int64_t>(value) * scale);
  }
}

// A setting stored in one or more fields, each named by an accessor `[](auto& c) -> auto& {
// return c.some.field; }` (generic, so one lambda serves reads and writes). The first field
// is the one read back; the others receive the same value (text and tensor servables share
// batching settings). `scale` converts the key's unit to the field's (millis -> micros).
template <typename Access, typename... More>
Setting Bind(std::string key, std::string description, int64_t scale, Access access, More... more) {
  using F = std::remove_cvref_t<decltype(access(std::declval<ServerConfig&>()))>;
  static_assert(
      (std::is_same_v<F, std::remove_cvref_t<decltype(more(std::declval<ServerConfig&>()))>> &&
       ...),
      "every field of one setting must have the same type");
  Setting s;
  s.key = std::move(key);
  s.description = std::move(description);
  if constexpr (std::is_same_v<F, bool>) {
    s.kind = Kind::kBool;
  } else if constexpr (std::is_same_v<F, std::string>) {
    s.kind = Kind::kString;
  } else {
    static_assert(std::is_integral_v<F>, "settings are integers, booleans or strings");
    s.kind = Kind::kInt;
    if constexpr (std::is_signed_v<F>) {
      s.min = static_cast<int64_t>(std::numeric_limits<F>::min()) / scale;
    } else {
      s.min = 0;
    }
    const uint64_t type_max = static_cast<uint64_t>(std::numeric_limits<F>::max());
    s.max = static_cast<int64_t>(std::min<uint64_t>(type_max, kInt64Max)) / scale;
  }
  s.set = [=](ServerConfig& c, const Value& v) {
    StoreField(access(c), v, scale);
    (StoreField(more(c), v, scale), ...);
  };
  s.get = [=](const ServerConfig& c) { return ReadField(access(c), scale); };
  s.consistent = [=](const ServerConfig& c) {
    const Value first = ReadField(access(c), scale);
    return ((ReadField(more(c), scale) == first) && ...);
  };
  return s;
}

template <typename Access, typename... More>
Setting Field(std::string key, std::string description, Access access, More... more) {
  return Bind(std::move(key), std::move(description), 1, access, more...);
}

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
  t.push_back(Field("auth.api_keys_file",
                    "File of API keys, one per line: '<key> [<requests per second>]'. With any "
                    "API key configured, inference routes need 'Authorization: Bearer <key>'.",
                    [](auto& c) -> auto& { return c.auth.api_keys_file; }));
  t.push_back(Field("auth.api_keys",
                    "More API keys, comma-separated (set it as TAILCUT_AUTH_API_KEYS, not a flag).",
                    [](auto& c) -> auto& { return c.auth.api_keys; }));
  t.push_back(Field("auth.admin_keys",
                    "Keys for the /admin routes, comma-separated; without any they are refused.",
                    [](auto& c) -> auto& { return c.auth.admin_keys; }));
  t.push_back(Field(
                  "auth.rate_limit_per_s",
                  "Default per-key request rate limit (requests/s); 0 = unlimited.",
                  [](auto& c) -> auto& { return c.auth.rate_limit_per_s; })
                  .AtLeast(0));
  t.push_back(Field("auth.public_health", "Health routes need no key even when keys are set.",
                    [](auto& c) -> auto& { return c.auth.public_health; }));
  t.push_back(Field("auth.public_metrics", "/metrics needs no key even when keys are set.",
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
                  "workers (all CPUs when both are 0).",
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
                  "(1 when both are 0).",
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
  t.push_back(Bind("requests.max_queue_delay_millis",
                   "Refuse (429) a request when the work ahead of it (the running batch's rest "
                   "and the queued rows, at the batch cost fitted to recent batches, plus the "
                   "measured margin of waits over estimates) would take longer than this before "
                   "its first batch; 0 = off.",
                   1000, [](auto& c) -> auto& { return c.service.text.max_queue_delay_micros; })
                  .AtLeast(0));
  t.push_back(Field(
                  "requests.max_inputs_per_request",
                  "Most texts in one embedding request; more get 413.",
                  [](auto& c) -> auto& { return c.service.text.max_inputs_per_request; })
                  .AtLeast(1));

  // cache: the embedding cache hierarchy (L1CacheOptions, EmbeddingCacheOptions).
  t.push_back(Field("cache.enabled",
                    "Cache embeddings in process (L1). Single-flight and Redis (if enabled) still work "
                    "without it.",
                    [](auto& c) -> auto& { return c.service.cache_enabled; }));
  t.push_back(Field(
                  "cache.l1_capacity_bytes", "Bytes the in-process cache may hold.",
                  [](auto& c) -> auto& { return c.service.l1.capacity_bytes; })
                  .AtLeast(1));
  t.push_back(Bind("cache.l1_ttl_seconds", "How long an L1 entry stays valid; 0 = no expiry.",
                   1'000'000, [](auto& c) -> auto& { return c.service.l1.ttl_micros; })
                  .AtLeast(0));
  t.push_back(Field(
                  "cache.l1_shards", "Lock stripes of the in-process cache.",
                  [](auto& c) -> auto& { return c.service.l1.shards; })
                  .AtLeast(1)
                  .AtMost(1024));
  t.push_back(Field("cache.l1_admission_filter",
                    "W-TinyLFU admission (resists one-hit wonders); false = plain segmented LRU.",
                    [](auto& c) -> auto& { return c.service.l1.admission_filter; }));
  t.push_back(Field("cache.single_flight",
                    "Identical concurrent misses in this process share one computation.",
                    [](auto& c) -> auto& { return c.service.cache.single_flight; }));
  t.push_back(Field("cache.distributed_single_flight",
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

  t.push_back(Field("cache.warmup",
                    "Predictive warm-up: refresh entries of keys forecast to stay hot before "
                    "they expire.",
                    [](auto& c) -> auto& { return c.service.text.warmup; }));
  t.push_back(Bind("cache.warmup_bucket_seconds",
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
  t.push_back(Bind("cache.warmup_refresh_horizon_seconds",
                   "Warm entries that would expire within this long (or are missing).",
                   1'000'000,
                   [](auto& c) -> auto& { return c.service.text.warmup_refresh_horizon_micros; })
                  .AtLeast(0));
  t.push_back(Field(
                  "cache.warmup_max_recompute_per_bucket",
                  "Model runs warm-up may cause per round (only while the queue is empty).",
                  [](auto& c) -> auto& { return c.service.text.warmup_max_recompute_per_bucket; })
                  .AtLeast(0));

  // redis: the shared L2 tier (RedisOptions); off unless redis.enabled.
  t.push_back(Field("redis.enabled", "Use Redis as the shared L2 cache tier.",
                    [](auto& c) -> auto& { return c.service.redis_enabled; }));
  t.push_back(Field(
                  "redis.host", "Redis address.",
                  [](auto& c) -> auto& { return c.service.redis.host; })
                  .NonEmpty());
  t.push_back(Field(
                  "redis.port", "Redis port.",
                  [](auto& c) -> auto& { return c.service.redis.port; })
                  .AtLeast(1)
                  .AtMost(65535));
  t.push_back(Field("redis.username", "ACL user; empty = the default user.",
                    [](auto& c) -> auto& { return c.service.redis.username; }));
  t.push_back(Field("redis.password",
                    "Password (AUTH); never logged. Prefer TAILCUT_REDIS_PASSWORD to a flag.",
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
      "precision.allow_below_fidelity_floor",
      "Opt in to switching to a batch-invariant variant under the fidelity floor or unmeasured.",
      [](auto& c) -> auto& { return c.service.text.precision.allow_below_fidelity_floor; }));
  t.push_back(Bind("precision.slo_p99_millis", "The latency objective the slo mode protects.",
                   1000, [](auto& c) -> auto& { return c.service.text.precision.slo_p99_micros; })
                  .AtLeast(1));
  t.push_back(Field(
                  "precision.degrade_at_slo_percent",
                  "slo: switch to the fast variant when P99 reaches this share of the SLO.",
                  [](auto& c) -> auto& { return c.service.text.precision.degrade_at_slo_percent; })
                  .AtLeast(1)
                  .AtMost(1000));
  t.push_back(Field(
                  "precision.restore_below_slo_percent",
                  "slo: return when the accurate variant's predicted P99 is under this share.",
                  [](auto& c) -> auto& {
                    return c.service.text.precision.restore_below_slo_percent;
                  })
                  .AtLeast(1)
                  .AtMost(1000));
  t.push_back(Field(
                  "precision.degrade_at_utilization_percent",
                  "slo: switch to the fast variant when the inference worker is this busy.",
                  [](auto& c) -> auto& {
                    return c.service.text.precision.degrade_at_utilization_percent;
                  })
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
  t.push_back(Field(
                  "precision.fast_at_memory_used_percent",
                  "thresholds: memory use above which (with the rate) the fast variant serves.",
                  [](auto& c) -> auto& {
                    return c.service.text.precision.fast_at_memory_used_percent;
                  })
                  .AtLeast(0)
                  .AtMost(100));
  t.push_back(Field(
                  "precision.accurate_at_rate_per_s",
                  "thresholds: rate at or below which the accurate variant may return.",
                  [](auto& c) -> auto& { return c.service.text.precision.accurate_at_rate_per_s; })
                  .AtLeast(0));
  t.push_back(Field(
                  "precision.accurate_at_memory_free_bytes",
                  "thresholds: free memory needed (with the rate) to return to the accurate one.",
                  [](auto& c) -> auto& {
                    return c.service.text.precision.accurate_at_memory_free_bytes;
                  })
                  .AtLeast(0));
  t.push_back(Bind("precision.min_dwell_millis",
                   "No switch sooner than this after the previous one (anti-flapping).", 1000,
                   [](auto& c) -> auto& { return c.service.text.precision.min_dwell_micros; })
                  .AtLeast(0));
  t.push_back(Field("precision.reference_backfill_max_keys",
                    "Inputs computed by the fast variant remembered to get accurate rows in "
                    "idle time; the controller returns only once none are owed. 0 = off.",
                    [](auto& c) -> auto& { return c.service.text.reference_backfill_max_keys; })
                  .AtLeast(0));
  t.push_back(Field(
                  "precision.reference_backfill_rows_per_round",
                  "Accurate rows the backfill adds per idle 50 ms (bounds its cost to a client).",
                  [](auto& c) -> auto& { return c.service.text.reference_backfill_rows_per_round; })
                  .AtLeast(0));
  t.push_back(Bind("precision.interval_millis", "How often the controller evaluates the load.",
                   1000, [](auto& c) -> auto& { return c.service.text.precision_interval_micros; })
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
  return t;
}

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
      {"cache",
       "The embedding cache in front of every text model: in-process L1, single-flight."},
      {"redis",
       "Redis as the shared L2 tier. Optional: without it the server runs on L1 alone. Its "
       "failures never fail requests: a circuit breaker bypasses it."},
      {"precision",
       "Which precision variant serves requests that pin none. The controller only runs for "
       "models with both the accurate and the fast variant loaded."},
      {"log", "Logging."},
  };
  return sections;
}

// ---------------------------------------------------------------------------------------------
// Names derived from a key.

constexpr std::string_view kEnvPrefix = "TAILCUT_";

std::string EnvName(std::string_view key) {
  std::string env(kEnvPrefix);
  for (char ch : key) {
    env += ch == '.' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  }
  return env;
}

std::string FlagName(std::string_view key) {
  return "--" + std::string(key);
}

std::string_view SectionOf(std::string_view key) {
  return key.substr(0, key.find('.'));
}

// ---------------------------------------------------------------------------------------------
// Text -> value, shared by all three sources so a value means the same everywhere.

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& ch : out) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}

std::string JoinChoices(const std::vector<std::string>& choices) {
  std::string out;
  for (const auto& c : choices) out += (out.empty() ? "" : ", ") + c;
  return out;
}

// The value as it appears in an error: quoted when it would otherwise be invisible or
// ambiguous (empty, or with spaces at an end).
std::string ShowValue(std::string_view text) {
  const bool quote = text.empty() || std::isspace(static_cast<unsigned char>(text.front())) ||
                     std::isspace(static_cast<unsigned char>(text.back()));
  return quote ? "\"" + std::string(text) + "\"" : std::string(text);
}

// Parses `text` for `s`; on failure returns nullopt and sets `problem` to a phrase that
// follows the value ("is not an integer").
std::optional<Value> ParseValue(const Setting& s, std::string_view text, std::string* problem) {
  switch (s.kind) {
    case Kind::kBool: {
      const std::string v = Lower(text);
      if (v == "true" || v == "1" || v == "yes") return Value(true);
      if (v == "false" || v == "0" || v == "no") return Value(false);
      *problem = "is not a boolean (true/false, 1/0, yes/no)";
      return std::nullopt;
    }
    case Kind::kInt: {
      int64_t v = 0;
      const char* end = text.data() + text.size();
      const auto [ptr, ec] = std::from_chars(text.data(), end, v);
      if (ec == std::errc::result_out_of_range && ptr == end) {
        *problem = text.front() == '-' ? "is too small: must be at least " + std::to_string(s.min)
                                       : "is too large: must be at most " + std::to_string(s.max);
        return std::nullopt;
      }
      if (ec != std::errc() || ptr != end || text.empty()) {
        *problem = "is not an integer";
        return std::nullopt;
      }
      if (!s.choices.empty() &&
          std::find(s.choices.begin(), s.choices.end(), std::to_string(v)) == s.choices.end()) {
        *problem = "is not one of " + JoinChoices(s.choices);
        return std::nullopt;
      }
      if (v < s.min) {
        *problem = "is too small: must be at least " + std::to_string(s.min);
        return std::nullopt;
      }
      if (v > s.max) {
        *problem = "is too large: must be at most " + std::to_string(s.max);
        return std::nullopt;
      }
      return Value(v);
    }
    case Kind::kString: {
      if (!s.choices.empty()) {
        const std::string v = Lower(text);
        for (const auto& c : s.choices) {
          if (v == c) return Value(c);
        }
        *problem = "is not one of " + JoinChoices(s.choices);
        return std::nullopt;
      }
      if (s.non_empty && text.empty()) {
        *problem = "must not be empty";
        return std::nullopt;
      }
      return Value(std::string(text));
    }
  }
  return std::nullopt;
}

std::string KindName(const Setting& s) {
  switch (s.kind) {
    case Kind::kBool:
      return "a boolean";
    case Kind::kInt:
      return "an integer";
    case Kind::kString:
      return "a string";
  }
  return "a value";
}

std::string FormatValue(const Value& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (const auto* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  return std::get<std::string>(v);
}

// ---------------------------------------------------------------------------------------------
// Typo suggestions.

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// A name a typo may have been aimed at: `leaf` is the part after the section, so that a
// setting put in the wrong section ("server.max_batch_size") is recognised.
struct Candidate {
  std::string name;
  std::string leaf;
};

// " (did you mean X?)" for the candidate nearest to the unknown `name`, or "" when none is
// near. An exact leaf match (the setting exists, in another section) beats any spelling.
std::string Suggestion(std::string_view name, std::string_view leaf,
                       const std::vector<Candidate>& candidates) {
  const std::string lower = Lower(name);
  const std::string lower_leaf = Lower(leaf);
  const Candidate* best = nullptr;
  size_t best_distance = std::max<size_t>(2, name.size() / 4) + 1;
  for (const auto& c : candidates) {
    const size_t d = Lower(c.leaf) == lower_leaf ? 0 : EditDistance(lower, Lower(c.name));
    if (d < best_distance) {
      best = &c;
      best_distance = d;
    }
  }
  return best == nullptr ? "" : " (did you mean " + best->name + "?)";
}

std::vector<std::string> AllKeys() {
  std::vector<std::string> keys;
  for (const auto& s : Settings()) keys.push_back(s.key);
  return keys;
}

std::string_view AfterFirst(std::string_view s, char separator) {
  const size_t pos = s.find(separator);
  return pos == std::string_view::npos ? s : s.substr(pos + 1);
}

// Keys and section names, for unknown YAML keys at any depth.
std::vector<Candidate> KeyCandidates() {
  std::vector<Candidate> out;
  for (const auto& [section, intro] : Sections()) out.push_back({section, section});
  for (const auto& s : Settings()) out.push_back({s.key, std::string(AfterFirst(s.key, '.'))});
  return out;
}

// ---------------------------------------------------------------------------------------------
// Sources.

const Setting* FindSetting(std::string_view key) {
  for (const auto& s : Settings()) {
    if (s.key == key) return &s;
  }
  return nullptr;
}

// Whether `path` names a section (a proper prefix of some key at a dot).
bool IsSection(std::string_view path) {
  for (const auto& s : Settings()) {
    if (s.key.size() > path.size() && s.key.compare(0, path.size(), path) == 0 &&
        s.key[path.size()] == '.') {
      return true;
    }
  }
  return false;
}

std::string NodeKindName(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Null:
      return "empty";
    default:
      return "a scalar";
  }
}

class FileApplier {
 public:
  FileApplier(std::string path, ServerConfig* config, std::vector<std::string>* errors)
      : path_(std::move(path)), config_(config), errors_(errors) {}

  void Apply() {
    std::ifstream in(path_, std::ios::binary);
    if (!in) {
      errors_->push_back("cannot read config file " + path_ + ": " + std::strerror(errno));
      return;
    }
    std::stringstream text;
    text << in.rdbuf();
    YAML::Node root;
    try {
      root = YAML::Load(text.str());
    } catch (const YAML::ParserException& e) {
      errors_->push_back(Where(e.mark) + "invalid YAML: " + e.msg);
      return;
    }
    if (root.IsNull()) return;  // An empty file (or only comments) sets nothing.
    if (!root.IsMap()) {
      errors_->push_back(Where(root.Mark()) + "the top level must be a map of sections, not " +
                         NodeKindName(root));
      return;
    }
    Walk(root, "");
  }

 private:
  // "server.port" -> "server: {port: ...}".
  static std::string Nested(std::string_view path) {
    std::string out;
    size_t depth = 0;
    size_t start = 0;
    for (size_t dot = path.find('.'); dot != std::string_view::npos;
         start = dot + 1, dot = path.find('.', start), ++depth) {
      out += std::string(path.substr(start, dot - start)) + ": {";
    }
    out += std::string(path.substr(start)) + ": ...";
    return out + std::string(depth, '}');
  }

  std::string Where(const YAML::Mark& mark) const {
    if (mark.is_null()) return path_ + ": ";
    return path_ + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1) +
           ": ";
  }

  void Walk(const YAML::Node& map, const std::string& prefix) {
    std::set<std::string> seen;
    for (const auto& entry : map) {
      // Copies (cheap handles): the iterator's pair is a temporary.
      const YAML::Node key_node = entry.first;
      const YAML::Node value = entry.second;
      if (!key_node.IsScalar()) {
        errors_->push_back(Where(key_node.Mark()) + "keys must be plain names, not " +
                           NodeKindName(key_node));
        continue;
      }
      const std::string path =
          prefix.empty() ? key_node.Scalar() : prefix + "." + key_node.Scalar();
      // yaml-cpp keeps both copies of a repeated key; which one wins would be an accident.
      if (!seen.insert(key_node.Scalar()).second) {
        errors_->push_back(Where(key_node.Mark()) + path + " is given twice");
        continue;
      }
      if (key_node.Scalar().find('.') != std::string::npos) {
        // One spelling per setting: a flat "server.port" beside a nested one would be two
        // values for one key.
        errors_->push_back(Where(key_node.Mark()) + "unknown key " + path +
                           " (keys are not dotted in files: write it " + Nested(path) + ")");
      } else if (const Setting* s = FindSetting(path)) {
        ApplyLeaf(*s, key_node, value);
      } else if (IsSection(path)) {
        if (value.IsNull()) continue;  // "server:" with everything below commented out.
        if (!value.IsMap()) {
          errors_->push_back(Where(value.Mark()) + path + " must be a map of settings, not " +
                             NodeKindName(value));
          continue;
        }
        Walk(value, path);
      } else {
        errors_->push_back(Where(key_node.Mark()) + "unknown key " + path +
                           Suggestion(path, AfterFirst(path, '.'), KeyCandidates()));
      }
    }
  }

  void ApplyLeaf(const Setting& s, const YAML::Node& key_node, const YAML::Node& value) {
    if (value.IsNull()) {
      errors_->push_back(Where(key_node.Mark()) + s.key +
                         " has no value (remove the key to keep the default)");
      return;
    }
    if (!value.IsScalar()) {
      errors_->push_back(Where(value.Mark()) + s.key + " must be " + KindName(s) + ", not " +
                         NodeKindName(value));
      return;
    }
    std::string problem;
    const auto parsed = ParseValue(s, value.Scalar(), &problem);
    if (!parsed) {
      errors_->push_back(Where(value.Mark()) + s.key + "=" + ShowValue(value.Scalar()) + " " +
                         problem);
      return;
    }
    s.set(*config_, *parsed);
  }

  const std::string path_;
  ServerConfig* const config_;
  std::vector<std::string>* const errors_;
};

void ApplyEnvironment(const std::map<std::string, std::string>& env, ServerConfig* config,
                      std::vector<std::string>* errors) {
  std::set<std::string> env_names;
  std::vector<Candidate> candidates;
  for (const auto& s : Settings()) {
    const std::string name = EnvName(s.key);
    env_names.insert(name);
    candidates.push_back({name, EnvName(AfterFirst(s.key, '.')).substr(kEnvPrefix.size())});
    const auto it = env.find(name);
    if (it == env.end()) continue;
    std::string problem;
    const auto parsed = ParseValue(s, it->second, &problem);
    if (!parsed) {
      errors->push_back(name + "=" + ShowValue(it->second) + " " + problem);
      continue;
    }
    s.set(*config, *parsed);
  }
  // A variable in a settings section that names no setting is a typo (or a removed setting)
  // that would otherwise leave the default silently in force. Other TAILCUT_* variables
  // (TAILCUT_CONFIG, TAILCUT_MODEL_DIR of other commands, build variables) are not ours.
  for (const auto& [name, value] : env) {
    if (env_names.count(name) > 0) continue;
    for (const auto& [section, intro] : Sections()) {
      const std::string prefix = EnvName(section) + "_";
      if (name.starts_with(prefix)) {
        errors->push_back("unknown environment variable " + name +
                          Suggestion(name, name.substr(prefix.size()), candidates));
        break;
      }
    }
  }
}

std::map<std::string, std::string> ProcessEnvironment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const size_t eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return env;
}

std::string TypeDescription(const Setting& s) {
  switch (s.kind) {
    case Kind::kBool:
      return "boolean";
    case Kind::kString:
      if (!s.choices.empty()) {
        std::string out = "one of ";
        for (size_t i = 0; i < s.choices.size(); ++i) {
          out += (i ? ", `" : "`") + s.choices[i] + "`";
        }
        return out;
      }
      return s.non_empty ? "non-empty string" : "string";
    case Kind::kInt:
      if (!s.choices.empty()) return "one of " + JoinChoices(s.choices);
      if (s.explicit_min && s.explicit_max) {
        return "integer " + std::to_string(s.min) + ".." + std::to_string(s.max);
      }
      if (s.explicit_min) return "integer >= " + std::to_string(s.min);
      return "integer";
  }
  return "";
}

std::string EscapeCell(std::string_view text) {
  std::string out;
  for (char ch : text) {
    if (ch == '|') out += '\\';
    out += ch;
  }
  return out;
}

}  // namespace

// -------------------------------------------------------------------------------------------
// ServerConfigLoader

ServerConfigLoader::ServerConfigLoader(CLI::App& cmd) {
  config_option_ = cmd.add_option("--config", config_raw_,
                                  "YAML config file (overrides defaults; overridden by "
                                  "environment and flags) [env TAILCUT_CONFIG]");
  config_option_->type_name("PATH")->group("Common options");

  const ServerConfig defaults;  // Shown in --help only; Load() starts from its own.
  const std::vector<Setting>& settings = Settings();
  for (size_t i = 0; i < settings.size(); ++i) {
    const Setting& s = settings[i];
    const std::string type = s.kind == Kind::kBool  ? "[=BOOL]"
                             : s.kind == Kind::kInt ? "INT"
                             : !s.choices.empty()   ? "LEVEL"
                                                    : "TEXT";
    const auto add = [&](const std::string& name, const std::string& help,
                         const std::string& group) {
      Flag& flag = flags_.emplace_back();
      flag.setting = i;
      flag.name = name;
      // Booleans are flags, so `--models.lazy_loading` alone means true; `=false` still works.
      const std::string shown_default = FormatValue(s.get(defaults));
      if (s.kind == Kind::kBool) {
        // CLI11 would print "[=BOOL]=false", which reads like usage; say it in words.
        flag.option = cmd.add_flag(name, flag.raw, help + " (default " + shown_default + ")");
      } else {
        // default_str() is display only: nothing is stored unless the flag is given.
        flag.option = cmd.add_option(name, flag.raw, help)->default_str(shown_default);
      }
      flag.option->type_name(type)
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
          ->group(group);
    };
    add(FlagName(s.key), s.description + " [env " + EnvName(s.key) + "]",
        "Settings (see docs/configuration.md)");
    if (!s.alias.empty()) {
      // A separate option, not a second name of the first, so errors name the flag as typed.
      add(s.alias, s.description + " Same as " + FlagName(s.key) + ".", "Common options");
    }
  }
}

Result<ServerConfig> ServerConfigLoader::Load(
    const std::map<std::string, std::string>* env_override) {
  const std::map<std::string, std::string> env =
      env_override != nullptr ? *env_override : ProcessEnvironment();
  ServerConfig config;
  std::vector<std::string> errors;

  // An explicit --config "" means no file, even when TAILCUT_CONFIG names one.
  config_path_.clear();
  if (config_option_->count() > 0) {
    config_path_ = config_raw_;
  } else if (const auto it = env.find("TAILCUT_CONFIG"); it != env.end()) {
    config_path_ = it->second;
  }
  if (!config_path_.empty()) FileApplier(config_path_, &config, &errors).Apply();

  ApplyEnvironment(env, &config, &errors);

  const std::vector<Setting>& settings = Settings();
  std::map<size_t, const Flag*> given;  // Setting -> the flag that set it.
  for (const Flag& flag : flags_) {
    if (flag.option->count() == 0) continue;
    // "--port 1 --server.port 2": CLI11 does not tell their order, so neither may win.
    if (const auto [it, first] = given.emplace(flag.setting, &flag); !first) {
      errors.push_back(it->second->name + " and " + flag.name +
                       " are the same setting; give only one");
      continue;
    }
    const Setting& s = settings[flag.setting];
    std::string problem;
    const auto parsed = ParseValue(s, flag.raw, &problem);
    if (!parsed) {
      errors.push_back(flag.name + "=" + ShowValue(flag.raw) + " " + problem);
      continue;
    }
    s.set(config, *parsed);
  }

  if (!errors.empty()) {
    std::string message;
    for (const auto& e : errors) message += (message.empty() ? "" : "; ") + e;
    return Status::InvalidArgument(message);
  }
  return config;
}

// -------------------------------------------------------------------------------------------
// Reference

std::string ConfigReferenceMarkdown() {
  const ServerConfig defaults;
  std::string md;
  md +=
      "# Configuration\n"
      "\n"
      "<!-- Generated from the settings table in src/config/server_config.cc by\n"
      "     ConfigReferenceMarkdown(); do not edit by hand. config_test fails when this file\n"
      "     is stale and prints the command that regenerates it. -->\n"
      "\n"
      "`tailcut serve` takes every setting from four places. Each overrides the ones above "
      "it:\n"
      "\n"
      "1. **Built-in defaults** (the Default column below).\n"
      "2. **A YAML config file**, named by `--config PATH` or else by `$TAILCUT_CONFIG`. "
      "Without either, no file is read. `--config \"\"` reads none even when "
      "`$TAILCUT_CONFIG` is set.\n"
      "3. **Environment variables**: `TAILCUT_` followed by the key upper-cased, dots "
      "replaced by underscores.\n"
      "4. **Command-line flags**: `--` followed by the key, and a short alias for the common "
      "settings. A flag given twice takes its last value.\n"
      "\n"
      "So `server.port` is written `server: {port: 9000}` in the file (one nested map per "
      "dot), `TAILCUT_SERVER_PORT=9000` in the environment, and `--server.port 9000` or "
      "`--port 9000` on the command line. [example-config.yaml](example-config.yaml) is an "
      "example file.\n"
      "\n"
      "Mistakes stop the server at start-up with a message naming the source and the value "
      "(`config.yaml:3:9: server.port=abc is not an integer`, `TAILCUT_SERVER_PORT=abc is "
      "not an integer`): unknown keys in the file, unknown `TAILCUT_<SECTION>_*` variables "
      "(a typo must not leave a default silently in force), values of the wrong type, and "
      "values out of range. A bad value is an error even where a higher source overrides "
      "it. Every mistake is reported at once.\n"
      "\n"
      "Booleans accept `true`/`false`, `1`/`0` and `yes`/`no`. A boolean flag given bare "
      "means true (`--models.lazy_loading`); give a value with `=` "
      "(`--models.lazy_loading=false`). Relative paths are relative to the working folder, "
      "not to the config file.\n";

  const std::vector<Setting>& settings = Settings();
  for (const auto& [section, intro] : Sections()) {
    md += "\n## " + section + "\n\n" + intro + "\n\n";
    md += "| Key | Environment variable | Flag | Type | Default | Description |\n";
    md += "|---|---|---|---|---|---|\n";
    for (const auto& s : settings) {
      if (SectionOf(s.key) != section) continue;
      std::string flags = "`" + FlagName(s.key) + "`";
      if (!s.alias.empty()) flags += ", `" + s.alias + "`";
      const std::string value = FormatValue(s.get(defaults));
      const std::string shown = value.empty() ? "`\"\"`" : "`" + value + "`";
      md += "| `" + s.key + "` | `" + EnvName(s.key) + "` | " + flags + " | " +
            EscapeCell(TypeDescription(s)) + " | " + EscapeCell(shown) + " | " +
            EscapeCell(s.description) + " |\n";
    }
  }
  return md;
}

std::vector<std::string> ConfigKeys() {
  return AllKeys();
}

std::optional<std::string> FormatConfigValue(const ServerConfig& config, std::string_view key) {
  const Setting* s = FindSetting(key);
  if (s == nullptr) return std::nullopt;
  // Secrets are never printed, not even in an effective-configuration dump.
  if (key.ends_with("password") || key.ends_with("_keys")) return std::string(s->get(config) == Value(std::string()) ? "" : "***");
  return FormatValue(s->get(config));
}

namespace config_internal {

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

}  // namespace tailcut
