#include "server/api_context.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <random>

#include "server/request_spans.h"

namespace tailcut {
namespace {

// `stages` (Server-Timing syntax) with the request's total appended.
std::string WithTotal(std::string_view stages, const StageTimings& timings) {
  char total[48];
  std::snprintf(total, sizeof total, ", total;dur=%.3f",
                static_cast<double>(timings.total_micros) / 1000.0);
  return std::string(stages) + total;
}

}  // namespace

ApiContext::ApiContext(InferenceApi& api, MetricsRegistry& metrics,
                       const ApiContextOptions& options, const Clock& clock)
    : api_(api),
      registry_(metrics),
      options_(options),
      clock_(clock),
      requests_(metrics.AddCounter("tailcut_requests_total",
                                   "HTTP requests answered, by route, model and status",
                                   {"route", "model", "status"})),
      stage_seconds_(metrics.AddHistogram(
          "tailcut_request_stage_duration_seconds",
          "Per-route request stages: parse, serialize, and total (read to response ready)",
          LatencyBucketsSeconds(), {"route", "stage"})) {
  model_labels_.emplace_back();
  for (const auto& d : api_.ListModels()) {
    if (model_index_.emplace(d.name, model_labels_.size()).second) model_labels_.push_back(d.name);
  }
  const std::string default_model = api_.default_model();
  auto it = model_index_.find(default_model);
  if (it != model_index_.end()) {
    default_model_index_ = it->second;
  } else if (!default_model.empty()) {
    // "default" is labelled with the default model's name even if it is not served.
    default_model_index_ = model_labels_.size();
    model_labels_.push_back(default_model);
  }
  for (size_t i = 0; i < model_labels_.size(); ++i) {
    model_stats_.push_back(std::make_unique<ModelRequestStats>());
  }
}

const ModelRequestStats* ApiContext::StatsFor(const std::string& model) const {
  auto it = model_index_.find(model);
  return it == model_index_.end() ? nullptr : model_stats_[it->second].get();
}

template <typename R>
std::function<void(Result<R>)> ApiContext::OnWorkPool(std::function<void(Result<R>)> done,
                                                      size_t (*values)(const R&)) const {
  WorkPool* pool = options_.work_pool;
  if (!pool) return done;
  return [pool, values, heavy = options_.heavy_result_values,
          done = std::move(done)](Result<R> result) mutable {
    if (pool->OnPoolThread()) return done(std::move(result));
    const bool big = result.ok() && values(*result) >= heavy;
    pool->Submit(big ? WorkPool::Lane::kHeavy : WorkPool::Lane::kLight,
                 [done = std::move(done), result = std::move(result)]() mutable {
                   done(std::move(result));
                 });
  };
}

void ApiContext::Embed(const HttpExchange& exchange, EmbedRequest request, EmbedCallback done) {
  request.cancellation = exchange.cancellation();
  request.received_micros = exchange.received_micros();
  ApplyCacheControl(exchange.header("Cache-Control"), &request);
  Embed(std::move(request), std::move(done));
}

void ApiContext::Embed(EmbedRequest request, EmbedCallback done) {
  api_.Embed(std::move(request), OnWorkPool<EmbedResult>(std::move(done), [](const EmbedResult& r) {
               return r.embeddings.size();
             }));
}

void ApiContext::Infer(const HttpExchange& exchange, TensorRequest request, TensorCallback done) {
  request.cancellation = exchange.cancellation();
  Infer(std::move(request), std::move(done));
}

void ApiContext::Infer(TensorRequest request, TensorCallback done) {
  api_.Infer(std::move(request),
             OnWorkPool<TensorResult>(std::move(done), [](const TensorResult& r) {
               size_t n = 0;  // In 4-byte values, whatever the types: it only picks a lane.
               for (const Tensor& t : r.outputs) n += t.data.size() / sizeof(float);
               return n;
             }));
}

void ApiContext::Generate(const HttpExchange& exchange, GenerateRequest request,
                          GenerationSinkPtr sink) {
  request.cancellation = exchange.cancellation();
  ApplyCacheControl(exchange.header("Cache-Control"), &request);
  Generate(std::move(request), std::move(sink));
}

void ApiContext::Generate(GenerateRequest request, GenerationSinkPtr sink) {
  api_.Generate(std::move(request), std::move(sink));
}

void ApiContext::RunOnWorkPool(std::function<void()> task) {
  WorkPool* pool = options_.work_pool;
  if (!pool) return task();
  pool->Submit(WorkPool::Lane::kLight, std::move(task));
}

size_t ApiContext::ModelLabelIndex(const std::string& model) const {
  if (model.empty()) return 0;
  if (model == "default") return default_model_index_;
  auto it = model_index_.find(model);
  return it == model_index_.end() ? 0 : it->second;
}

std::string ApiContext::ModelLabel(const std::string& model) const {
  return model_labels_[ModelLabelIndex(model)];
}

ApiContext::RouteMetrics& ApiContext::MetricsFor(std::string_view route) {
  {
    std::shared_lock<std::shared_mutex> lock(routes_mutex_);
    auto it = routes_.find(route);
    if (it != routes_.end()) return *it->second;
  }
  std::unique_lock<std::shared_mutex> lock(routes_mutex_);
  auto& slot = routes_[std::string(route)];
  if (!slot) {
    const std::string r(route);
    auto m = std::make_unique<RouteMetrics>();
    m->parse = &stage_seconds_.WithLabels({r, "parse"});
    m->serialize = &stage_seconds_.WithLabels({r, "serialize"});
    m->total = &stage_seconds_.WithLabels({r, "total"});
    m->requests = decltype(m->requests)(model_labels_.size());
    slot = std::move(m);
  }
  return *slot;
}

void ApiContext::Finish(const HttpExchangePtr& exchange, std::string_view route,
                        const std::string& model, HttpResponse response, StageTimings timings,
                        std::string_view server_timing) {
  const std::string traceparent = TraceparentFor(exchange->header("traceparent"));
  Record(*exchange, route, model, response.status, timings, server_timing, traceparent, &response);
  response.headers.emplace_back("Server-Timing", server_timing.empty()
                                                     ? timings.ToServerTiming()
                                                     : WithTotal(server_timing, timings));
  response.headers.emplace_back("traceparent", traceparent);
  exchange->Respond(std::move(response));
}

void ApiContext::RecordStreamed(const HttpExchange& exchange, std::string_view route,
                                const std::string& model, unsigned status, StageTimings timings,
                                std::string_view server_timing, std::string_view traceparent) {
  Record(exchange, route, model, status, timings, server_timing, traceparent);
}

void ApiContext::Record(const HttpExchange& exchange, std::string_view route,
                        const std::string& model, unsigned status, StageTimings& timings,
                        std::string_view server_timing, std::string_view traceparent,
                        const HttpResponse* response) {
  CallRecord call;
  call.route = route;
  const auto method = exchange.request().method_string();
  call.method = std::string_view(method.data(), method.size());
  call.model = model;
  call.status = status;
  call.received_micros = exchange.received_micros();
  // Inference requests (POSTs naming a served model), not metadata reads or admin actions.
  call.inference =
      exchange.request().method() == boost::beast::http::verb::post && !route.starts_with("/admin");
  call.traceparent = traceparent;
  call.incoming_traceparent = exchange.header("traceparent");
  std::string cache_hits;
  if (response) {
    for (const auto& [name, value] : response->headers) {
      if (name == "X-Tailcut-Variant") call.variant = value;
      if (name == "X-Tailcut-Cache-Hits") cache_hits = value;
    }
    if (!cache_hits.empty()) {
      int64_t hits = 0;
      auto [end, ec] =
          std::from_chars(cache_hits.data(), cache_hits.data() + cache_hits.size(), hits);
      if (ec == std::errc()) call.cache_hits = hits;
    }
  }
  RecordCall(call, timings, server_timing);
}

void ApiContext::RecordCall(const CallRecord& call, StageTimings& timings,
                            std::string_view server_timing) {
  const std::string_view route = call.route;
  const unsigned status = call.status;
  const int64_t now = clock_.NowMicros();
  timings.total_micros = now - call.received_micros;
  RouteMetrics& m = MetricsFor(route);
  const size_t model_index = ModelLabelIndex(call.model);
  const auto* status_slot = std::find(kCachedStatuses.begin(), kCachedStatuses.end(), status);
  auto requests_child = [&] {
    return &requests_.WithLabels(
        {std::string(route), model_labels_[model_index], std::to_string(status)});
  };
  if (status_slot == kCachedStatuses.end()) {
    requests_child()->Inc();
  } else {
    const auto slot = static_cast<size_t>(status_slot - kCachedStatuses.begin());
    std::atomic<Counter*>& cached = m.requests[model_index][slot];
    Counter* counter = cached.load(std::memory_order_acquire);
    if (!counter) {
      counter = requests_child();
      cached.store(counter, std::memory_order_release);
    }
    counter->Inc();
  }
  m.parse->Observe(timings.parse_micros / 1e6);
  m.serialize->Observe(timings.serialize_micros / 1e6);
  m.total->Observe(timings.total_micros / 1e6);
  if (model_index != 0 && call.inference) {
    const auto unix_millis = std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count();
    model_stats_[model_index]->Record(status < 400, timings, unix_millis);
  }
  // Not health probes and scrapes: several a second per replica, and nothing to explain.
  const bool probe = route == "/metrics" || route == "/health" || route.starts_with("/v2/health");
  if (options_.tracer && !probe && !route.starts_with("/admin") &&
      TraceSampled(call.traceparent, call.incoming_traceparent, options_.trace_sample_ppm)) {
    RequestSpanInput span;
    span.route = route;
    span.method = call.method;
    span.model = model_labels_[model_index];
    span.status = status;
    span.traceparent = call.traceparent;
    span.incoming_traceparent = call.incoming_traceparent;
    span.variant = call.variant;
    span.cache_hits = call.cache_hits;
    span.end_unix_nanos =
        static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count());
    span.timings = timings;
    options_.tracer->Export(RequestSpans(span));
  }
  if (options_.slow_request_log_millis > 0 && !route.starts_with("/admin") &&
      timings.total_micros > options_.slow_request_log_millis * 1000) {
    // The trace id ties this line to the client's trace (W3C traceparent).
    spdlog::warn(
        "slow request {} {} model={} status={} trace={} {}", call.method, route, call.model, status,
        call.traceparent.size() >= 35 ? call.traceparent.substr(3, 32) : std::string_view(),
        server_timing.empty() ? timings.ToServerTiming() : WithTotal(server_timing, timings));
  }
}

std::string TraceparentFor(std::string_view incoming) {
  // W3C Trace Context: "00-<32 hex trace id>-<16 hex parent span id>-<2 hex flags>". A valid
  // incoming header keeps its trace id and flags; the server's span gets a new id. Otherwise
  // the request starts a new trace.
  auto hex = [](std::string_view s) {
    for (char c : s) {
      if (!std::isxdigit(static_cast<unsigned char>(c)) ||
          std::isupper(static_cast<unsigned char>(c))) {
        return false;
      }
    }
    return true;
  };
  thread_local std::mt19937_64 rng(std::random_device{}());
  char span[17];
  std::snprintf(span, sizeof(span), "%016llx", static_cast<unsigned long long>(rng() | 1));
  if (incoming.size() == 55 && incoming.substr(0, 3) == "00-" && incoming[35] == '-' &&
      incoming[52] == '-' && hex(incoming.substr(3, 32)) && hex(incoming.substr(36, 16)) &&
      hex(incoming.substr(53, 2)) && incoming.substr(3, 32) != std::string(32, '0')) {
    return "00-" + std::string(incoming.substr(3, 32)) + "-" + span + "-" +
           std::string(incoming.substr(53, 2));
  }
  char trace[33];
  std::snprintf(trace, sizeof(trace), "%016llx%016llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng() | 1));
  return "00-" + std::string(trace) + "-" + span + "-01";
}

void ApiContext::FinishError(const HttpExchangePtr& exchange, std::string_view route,
                             const std::string& model, const Status& status, ErrorStyle style,
                             StageTimings timings) {
  Finish(exchange, route, model, ErrorResponse(status, style), timings);
}

Result<int64_t> ApiContext::DeadlineFromHeaders(const HttpExchange& exchange) const {
  const std::string_view v = exchange.header("X-Request-Timeout-Ms");
  if (v.empty()) return int64_t{0};
  int64_t millis = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), millis);
  if (ec != std::errc() || end != v.data() + v.size() || millis <= 0 || millis > 86'400'000) {
    return Status::InvalidArgument(
        "header X-Request-Timeout-Ms must be a whole number of milliseconds between 1 and "
        "86400000");
  }
  return exchange.received_micros() + millis * 1000;
}

namespace {
// no-cache: do not answer from the cache; no-store: neither read nor write it.
void ParseCacheControl(std::string_view v, bool* read, bool* write) {
  if (v.empty()) return;
  std::string lower(v);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower.find("no-cache") != std::string::npos) *read = false;
  if (lower.find("no-store") != std::string::npos) {
    *read = false;
    *write = false;
  }
}
}  // namespace

void ApiContext::ApplyCacheControl(std::string_view v, EmbedRequest* request) {
  ParseCacheControl(v, &request->cache_read, &request->cache_write);
}

void ApiContext::ApplyCacheControl(std::string_view v, GenerateRequest* request) {
  ParseCacheControl(v, &request->cache_read, &request->cache_write);
}

}  // namespace tailcut
