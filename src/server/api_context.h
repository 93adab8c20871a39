// ApiContext: what every protocol front-end shares: the core API it calls, the per-route
// request metrics, and the one place where a response leaves: Finish() stamps the
// Server-Timing header, records status and stage latencies, logs slow requests with their
// stage breakdown (with the W3C trace id, so a slow request can be found in the client's
// trace), and sends.
//
// Thread-safety: all methods are safe from any thread.
#pragma once

#include <array>
#include <atomic>
#include <map>
#include <memory>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/work_pool.h"
#include "core/inference_api.h"
#include "obs/metrics.h"
#include "obs/trace_exporter.h"
#include "server/http_errors.h"
#include "server/http_server.h"
#include "server/model_request_stats.h"

namespace tailcut {

struct ApiContextOptions {
  // Requests slower than this (total) are logged with their stage breakdown; 0 = never.
  int64_t slow_request_log_millis = 0;
  // Where results are turned into responses. A result arrives on whichever thread finished
  // the work (a batch worker, the Redis client's thread); formatting thousands of rows there
  // would hold up the next batch or every other Redis reply, so Embed() and Infer() hand the
  // result to this pool (results already on one of its threads are formatted in place).
  // Null: formatted where they arrive (unit tests, fuzzers).
  WorkPool* work_pool = nullptr;
  // Results with at least this many values (rows x dimensions, or tensor elements) are
  // formatted on the pool's heavy lane, so they cannot hold up small requests' answers
  // (src/common/work_pool.h). 32,768 values is about 300 KiB of JSON, a few ms to write.
  size_t heavy_result_values = 32'768;
  // Where finished requests' spans go (OTLP, obs/trace_exporter.h; server/request_spans.h
  // says what they hold); null = no tracing. Health probes, /metrics and /admin are not
  // traced. Must outlive the context.
  TraceExporter* tracer = nullptr;
  // Traces started here (no sampled caller) that are exported, in parts per million.
  int64_t trace_sample_ppm = 1'000'000;
};

class ApiContext {
 public:
  ApiContext(InferenceApi& api, MetricsRegistry& metrics, const ApiContextOptions& options,
             const Clock& clock = SystemClock::Get());

  InferenceApi& api() { return api_; }
  // The core API's Embed/Infer for a request read from `exchange`: the request is cancelled
  // when the exchange's client goes away, and `done` runs on the work pool (see
  // ApiContextOptions::work_pool). Embed also takes the exchange's arrival time and its
  // Cache-Control header (no-cache, no-store), as Generate does the header.
  void Embed(const HttpExchange& exchange, EmbedRequest request, EmbedCallback done);
  void Infer(const HttpExchange& exchange, TensorRequest request, TensorCallback done);
  // The same for a request from another transport, whose `request.cancellation` the caller
  // has set.
  void Embed(EmbedRequest request, EmbedCallback done);
  void Infer(TensorRequest request, TensorCallback done);
  void Generate(GenerateRequest request, GenerationSinkPtr sink);
  // The core API's Generate, cancelled like Embed's (and when a streamed answer's stream
  // closes for a slow reader). The sink is called on the generation step loop: it must not
  // block (server/generation_sink.h hands anything heavy to RunOnWorkPool).
  void Generate(const HttpExchange& exchange, GenerateRequest request, GenerationSinkPtr sink);
  // Runs `task` on the work pool's light lane; at once where there is no pool.
  void RunOnWorkPool(std::function<void()> task);
  const Clock& clock() const { return clock_; }
  MetricsRegistry& registry() { return registry_; }

  // Sends `response` for a request to `route` (a pattern such as "/v1/embeddings") on
  // `model`. `timings` may be partial; total and serialize are completed here. A non-empty
  // `server_timing` is sent in Server-Timing instead of the stages of `timings` (total is
  // appended): generation reports queue, prefill and decode, which StageTimings has no
  // names for.
  void Finish(const HttpExchangePtr& exchange, std::string_view route, const std::string& model,
              HttpResponse response, StageTimings timings, std::string_view server_timing = {});
  // Records the end of a streamed response (its head, with `traceparent`, went out when it
  // started) in the request metrics and the slow-request log, as Finish() does. `status` is
  // the HTTP status the answer would have had: 200, or an error's that ended it midway.
  void RecordStreamed(const HttpExchange& exchange, std::string_view route,
                      const std::string& model, unsigned status, StageTimings timings,
                      std::string_view server_timing, std::string_view traceparent);
  // A request answered over another transport (gRPC), recorded as Finish() records HTTP
  // ones: request metrics, per-model statistics when `inference`, the slow-request log.
  // `status` is the HTTP status of the same outcome (HttpStatusFor), so one error-rate query
  // covers every transport; `route` names the call ("/inference.GRPCInferenceService/...").
  struct CallRecord {
    std::string_view route;
    std::string_view method;  // For the slow-request log: "GET", "POST", "gRPC".
    std::string model;
    unsigned status = 200;
    int64_t received_micros = 0;            // clock() time the request arrived.
    bool inference = false;                 // A request to a model (counted in its statistics).
    std::string_view traceparent;           // The answer's.
    std::string_view incoming_traceparent;  // The caller's, for the trace's parent span.
    std::string_view variant;               // For the trace: the variant that computed it.
    int64_t cache_hits = -1;                // For the trace: rows from a cache (-1: n/a).
  };
  // `timings.total_micros` is filled in.
  void RecordCall(const CallRecord& call, StageTimings& timings,
                  std::string_view server_timing = {});
  // Sends an error for `status` in the route's API style.
  void FinishError(const HttpExchangePtr& exchange, std::string_view route,
                   const std::string& model, const Status& status, ErrorStyle style,
                   StageTimings timings = {});

  // The inference requests answered for the served model named `model` (canonical name), or
  // null for a name that is not served. Every POST to a model except /admin counts.
  const ModelRequestStats* StatsFor(const std::string& model) const;

  // The `model` label for request metrics: a served model's canonical name, or empty.
  // Requests name models freely, and every distinct label value is a time series held
  // forever, so names of models that do not exist must not become labels.
  std::string ModelLabel(const std::string& model) const;

  // Absolute deadline from the X-Request-Timeout-Ms header (0 if absent), or an error for a
  // malformed value.
  Result<int64_t> DeadlineFromHeaders(const HttpExchange& exchange) const;
  // Cache-Control: no-cache (do not read) / no-store (do not write) on the request, from the
  // header's (or gRPC metadata's) value.
  static void ApplyCacheControl(std::string_view cache_control, EmbedRequest* request);
  // For generation: the semantic output cache's read and write.
  static void ApplyCacheControl(std::string_view cache_control, GenerateRequest* request);

 private:
  // The statuses whose tailcut_requests_total children are kept per route and model; others
  // (rare) are looked up in the family each time.
  static constexpr std::array<unsigned, 13> kCachedStatuses = {200, 400, 401, 403, 404, 405, 409,
                                                               413, 422, 429, 500, 503, 504};
  // One route's metric children, looked up once: Finish() runs for every request, and a
  // family lookup builds a vector of label strings and takes the family's mutex.
  struct RouteMetrics {
    Histogram* parse;
    Histogram* serialize;
    Histogram* total;
    // tailcut_requests_total children, [model label index][kCachedStatuses index]; filled on
    // first use (a race fills a slot twice with the same child).
    std::vector<std::array<std::atomic<Counter*>, kCachedStatuses.size()>> requests;
  };
  RouteMetrics& MetricsFor(std::string_view route);
  // Finish()'s metrics and slow-request log; `timings.total_micros` is filled in.
  // `response`: the answer's headers (variant, cache hits) for the trace; null for a stream.
  void Record(const HttpExchange& exchange, std::string_view route, const std::string& model,
              unsigned status, StageTimings& timings, std::string_view server_timing,
              std::string_view traceparent, const HttpResponse* response = nullptr);
  // `done`, delivered on the work pool when there is one; `values` sizes a result for its lane.
  template <typename R>
  std::function<void(Result<R>)> OnWorkPool(std::function<void(Result<R>)> done,
                                            size_t (*values)(const R&)) const;
  // Index of ModelLabel(model) in model_labels_.
  size_t ModelLabelIndex(const std::string& model) const;

  InferenceApi& api_;
  MetricsRegistry& registry_;
  const ApiContextOptions options_;
  const Clock& clock_;
  Family<Counter>& requests_;
  Family<Histogram>& stage_seconds_;
  // Fixed once the service exists: the label values ("" first, then the served models'
  // names) and each served name's index among them.
  std::vector<std::string> model_labels_;
  std::map<std::string, size_t, std::less<>> model_index_;
  size_t default_model_index_ = 0;
  // Per entry of model_labels_ (the first, "", unused).
  std::vector<std::unique_ptr<ModelRequestStats>> model_stats_;
  mutable std::shared_mutex routes_mutex_;  // Guards routes_ (the map, not the children).
  std::map<std::string, std::unique_ptr<RouteMetrics>, std::less<>> routes_;
};

// The traceparent to answer with: the incoming trace continued with a new server span, or a
// new trace when the request carried no valid header.
std::string TraceparentFor(std::string_view incoming);

}  // namespace tailcut
