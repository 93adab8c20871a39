#include "obs/trace_exporter.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <chrono>
#include <utility>

#include "obs/otlp/otlp_trace.pb.h"

namespace tailcut {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;

void SetValue(const SpanAttributeValue& v, otlp::AnyValue* out) {
  if (const auto* s = std::get_if<std::string>(&v)) {
    out->set_string_value(*s);
  } else if (const auto* i = std::get_if<int64_t>(&v)) {
    out->set_int_value(*i);
  } else if (const auto* d = std::get_if<double>(&v)) {
    out->set_double_value(*d);
  } else {
    out->set_bool_value(std::get<bool>(v));
  }
}

}  // namespace

std::string TraceExporter::Encode(const std::vector<SpanData>& spans,
                                  const std::string& service_name) {
  otlp::ExportTraceServiceRequest request;
  auto* resource_spans = request.add_resource_spans();
  auto* name = resource_spans->mutable_resource()->add_attributes();
  name->set_key("service.name");
  name->mutable_value()->set_string_value(service_name);
  auto* scope_spans = resource_spans->add_scope_spans();
  scope_spans->mutable_scope()->set_name("tailcut");
  scope_spans->mutable_scope()->set_version(TAILCUT_VERSION);
  for (const SpanData& s : spans) {
    auto* span = scope_spans->add_spans();
    span->set_trace_id(s.trace_id);
    span->set_span_id(s.span_id);
    if (!s.parent_span_id.empty()) span->set_parent_span_id(s.parent_span_id);
    span->set_name(s.name);
    span->set_kind(static_cast<otlp::Span::SpanKind>(static_cast<int>(s.kind)));
    span->set_start_time_unix_nano(s.start_unix_nanos);
    span->set_end_time_unix_nano(s.end_unix_nanos);
    for (const SpanAttribute& a : s.attributes) {
      auto* kv = span->add_attributes();
      kv->set_key(a.key);
      SetValue(a.value, kv->mutable_value());
    }
    if (s.error) {
      span->mutable_status()->set_code(otlp::Status::STATUS_CODE_ERROR);
      span->mutable_status()->set_message(s.status_message);
    }
  }
  return request.SerializeAsString();
}

Result<std::unique_ptr<TraceExporter>> TraceExporter::Create(const TraceExporterOptions& options,
                                                             MetricsRegistry& metrics) {
  const std::string& url = options.otlp_endpoint;
  constexpr std::string_view kScheme = "http://";
  if (!url.starts_with(kScheme)) {
    return Status::InvalidArgument("tracing.otlp_endpoint must be http://host[:port]/path, got '" +
                                   url + "' (OTLP/HTTP; https is not supported)");
  }
  const std::string rest = url.substr(kScheme.size());
  const size_t slash = rest.find('/');
  const std::string authority = rest.substr(0, slash);
  Endpoint e;
  e.target = slash == std::string::npos ? "/v1/traces" : rest.substr(slash);
  const size_t colon = authority.rfind(':');
  if (colon != std::string::npos && authority.find(']') == std::string::npos) {
    e.host = authority.substr(0, colon);
    e.port = authority.substr(colon + 1);
  } else {
    e.host = authority;
    e.port = "80";
  }
  if (e.host.empty() || e.port.empty() ||
      e.port.find_first_not_of("0123456789") != std::string::npos) {
    return Status::InvalidArgument("tracing.otlp_endpoint must be http://host[:port]/path, got '" +
                                   url + "'");
  }
  return std::unique_ptr<TraceExporter>(new TraceExporter(options, std::move(e), metrics));
}

TraceExporter::TraceExporter(const TraceExporterOptions& options, Endpoint endpoint,
                             MetricsRegistry& metrics)
    : options_(options),
      endpoint_(std::move(endpoint)),
      exported_(metrics
                    .AddCounter("tailcut_trace_spans_exported_total",
                                "Spans the OTLP collector accepted")
                    .Get()),
      dropped_(metrics.AddCounter("tailcut_trace_spans_dropped_total",
                                  "Spans not exported: the queue was full (queue_full), or the "
                                  "collector did not take their batch (export_failed)",
                                  {"reason"})),
      dropped_full_(dropped_.WithLabels({"queue_full"})),
      dropped_failed_(dropped_.WithLabels({"export_failed"})),
      thread_([this] { Loop(); }) {}

TraceExporter::~TraceExporter() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void TraceExporter::Export(std::vector<SpanData> spans) {
  size_t dropped = 0;
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // The thread sleeps until a first span arrives (then waits out the batch timeout) or a
    // batch fills: those two moments wake it.
    const bool was_empty = queue_.empty();
    for (auto& s : spans) {
      if (queue_.size() >= options_.max_queue_spans) {
        ++dropped;
        continue;
      }
      queue_.push_back(std::move(s));
    }
    wake = (was_empty && !queue_.empty()) || queue_.size() >= options_.max_batch_spans;
  }
  if (dropped > 0) dropped_full_.Inc(static_cast<double>(dropped));
  if (wake) wake_.notify_one();
}

void TraceExporter::Loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    // Wait for a full batch, the batch timeout after the first queued span, or the stop.
    if (!stopping_ && queue_.size() < options_.max_batch_spans) {
      if (queue_.empty()) {
        wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      }
      wake_.wait_for(lock, std::chrono::milliseconds(options_.batch_timeout_millis),
                     [this] { return stopping_ || queue_.size() >= options_.max_batch_spans; });
    }
    if (queue_.empty()) {
      if (stopping_) return;
      continue;
    }
    std::vector<SpanData> batch;
    const size_t n = std::min(queue_.size(), options_.max_batch_spans);
    batch.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      batch.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    lock.unlock();
    const Status sent = Send(Encode(batch, options_.service_name));
    (sent.ok() ? exported_ : dropped_failed_).Inc(static_cast<double>(batch.size()));
    lock.lock();
  }
}

Status TraceExporter::Send(const std::string& body) {
  try {
    boost::asio::io_context io;
    boost::asio::ip::tcp::resolver resolver(io);
    beast::tcp_stream stream(io);
    stream.expires_after(std::chrono::milliseconds(options_.export_timeout_millis));
    stream.connect(resolver.resolve(endpoint_.host, endpoint_.port));
    http::request<http::string_body> req(http::verb::post, endpoint_.target, 11);
    req.set(http::field::host, endpoint_.host + ":" + endpoint_.port);
    req.set(http::field::content_type, "application/x-protobuf");
    req.body() = body;
    req.prepare_payload();
    http::write(stream, req);
    beast::flat_buffer buffer;
    http::response<http::string_body> res;
    http::read(stream, buffer, res);
    beast::error_code ignored;
    stream.socket().shutdown(boost::asio::ip::tcp::socket::shutdown_both, ignored);
    if (res.result_int() / 100 != 2) {
      return Status::Unavailable("collector answered " + std::to_string(res.result_int()));
    }
    return Status::Ok();
  } catch (const std::exception& e) {
    return Status::Unavailable(std::string("export failed: ") + e.what());
  }
}

}  // namespace tailcut
