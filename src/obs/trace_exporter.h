// TraceExporter: finished spans to an OpenTelemetry collector over OTLP/HTTP (protobuf,
// POST <endpoint>, e.g. http://127.0.0.1:4318/v1/traces), batched on a thread of its own.
//
// Never in a request's way: Export() only moves spans into a bounded queue (a full queue
// drops them, counted in tailcut_trace_spans_dropped_total{reason="queue_full"}); the export
// thread sends a batch when it has max_batch_spans or when batch_timeout_millis have passed,
// and a batch the collector does not take in export_timeout_millis (down, slow, an error
// status) is dropped and counted (reason="export_failed"), never retried: a trace arriving
// late is worth less than the memory and the next batch. Exported spans are counted in
// tailcut_trace_spans_exported_total.
//
// Thread-safety: Export() is safe from any thread. The destructor sends what is queued (each
// batch still bounded by export_timeout_millis) and joins the thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "common/status.h"
#include "obs/metrics.h"

namespace tailcut {

struct TraceExporterOptions {
  // Where the collector takes OTLP/HTTP: http://host:port/path (Jaeger and the OpenTelemetry
  // Collector: port 4318, path /v1/traces). Empty: no tracing.
  std::string otlp_endpoint;
  // Traces started here (no sampled caller) that are exported, per million: read by the
  // request side (ApiContextOptions::trace_sample_ppm), not by the exporter.
  int64_t sample_ppm = 1'000'000;
  // The resource's service.name, how the collector groups tailcut's spans.
  std::string service_name = "tailcut";
  // Spans held for export at most; more are dropped. Bounds the memory a collector outage
  // can cost: a request makes up to ten spans of a few hundred bytes.
  size_t max_queue_spans = 8192;
  // Spans per export request at most.
  size_t max_batch_spans = 512;
  // How long a span may wait for a batch to fill before it is sent anyway.
  int64_t batch_timeout_millis = 500;
  // How long one export request may take (connect, send, answer) before its batch is dropped.
  int64_t export_timeout_millis = 2000;
};

using SpanAttributeValue = std::variant<std::string, int64_t, double, bool>;
struct SpanAttribute {
  std::string key;
  SpanAttributeValue value;
};

struct SpanData {
  enum class Kind { kInternal = 1, kServer = 2, kClient = 3 };
  std::string trace_id;        // 16 bytes.
  std::string span_id;         // 8 bytes.
  std::string parent_span_id;  // 8 bytes; empty for a root span.
  std::string name;
  Kind kind = Kind::kInternal;
  uint64_t start_unix_nanos = 0;
  uint64_t end_unix_nanos = 0;
  std::vector<SpanAttribute> attributes;
  bool error = false;          // The span's status: ERROR with `status_message`, else unset.
  std::string status_message;
};

class TraceExporter {
 public:
  // InvalidArgument for an endpoint that is not http://host[:port]/path.
  static Result<std::unique_ptr<TraceExporter>> Create(const TraceExporterOptions& options,
                                                       MetricsRegistry& metrics);
  ~TraceExporter();
  TraceExporter(const TraceExporter&) = delete;
  TraceExporter& operator=(const TraceExporter&) = delete;

  // Queues `spans` for export (all of them, or as many as fit).
  void Export(std::vector<SpanData> spans);

  // The ExportTraceServiceRequest for `spans`, serialised: exposed for tests.
  static std::string Encode(const std::vector<SpanData>& spans, const std::string& service_name);

 private:
  struct Endpoint {
    std::string host, port, target;
  };
  TraceExporter(const TraceExporterOptions& options, Endpoint endpoint, MetricsRegistry& metrics);
  void Loop();
  // POSTs `body`; OK when the collector answered 2xx in time.
  Status Send(const std::string& body);

  const TraceExporterOptions options_;
  const Endpoint endpoint_;
  Counter& exported_;
  Family<Counter>& dropped_;
  Counter& dropped_full_;
  Counter& dropped_failed_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<SpanData> queue_;  // Guarded by mutex_.
  bool stopping_ = false;       // Guarded by mutex_.
  std::thread thread_;
};

}  // namespace tailcut
