#include "server/request_spans.h"

#include <algorithm>
#include <random>
#include <utility>

namespace tailcut {
namespace {

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// Hex text to bytes; empty when any character is not lower-case hex.
std::string FromHex(std::string_view hex) {
  std::string out;
  out.reserve(hex.size() / 2);
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    const int hi = HexDigit(hex[i]), lo = HexDigit(hex[i + 1]);
    if (hi < 0 || lo < 0) return {};
    out.push_back(static_cast<char>(hi << 4 | lo));
  }
  return out;
}

struct Parsed {
  std::string trace_id, span_id;
  bool sampled = false;
};

// "00-<32 hex>-<16 hex>-<2 hex>", or nothing.
bool Parse(std::string_view tp, Parsed* out) {
  if (tp.size() != 55 || tp.substr(0, 3) != "00-" || tp[35] != '-' || tp[52] != '-') return false;
  out->trace_id = FromHex(tp.substr(3, 32));
  out->span_id = FromHex(tp.substr(36, 16));
  const std::string flags = FromHex(tp.substr(53, 2));
  if (out->trace_id.size() != 16 || out->span_id.size() != 8 || flags.size() != 1) return false;
  if (out->trace_id == std::string(16, '\0') || out->span_id == std::string(8, '\0')) return false;
  out->sampled = (static_cast<unsigned char>(flags[0]) & 1u) != 0;
  return true;
}

std::string NewSpanId() {
  thread_local std::mt19937_64 rng(std::random_device{}());
  std::string id(8, '\0');
  uint64_t v = rng() | 1;
  for (int i = 0; i < 8; ++i) id[static_cast<size_t>(i)] = static_cast<char>(v >> (8 * i));
  return id;
}

// The Redis MGET inside the cache stage, a client span under it. Its answer is followed at
// once by the end of the cache stage (single-flight and queueing take microseconds), so it
// is placed at the stage's end.
SpanData RedisLookupSpan(const SpanData& cache, const StageTimings& t) {
  const StageTimings::RedisLookup& r = t.redis_lookup;
  SpanData s;
  s.trace_id = cache.trace_id;
  s.span_id = NewSpanId();
  s.parent_span_id = cache.span_id;
  s.name = "MGET";
  s.kind = SpanData::Kind::kClient;
  const uint64_t nanos = static_cast<uint64_t>(std::max<int64_t>(r.micros, 0)) * 1000;
  s.end_unix_nanos = cache.end_unix_nanos;
  s.start_unix_nanos = std::max(cache.start_unix_nanos,
                                cache.end_unix_nanos - std::min(nanos, cache.end_unix_nanos));
  // OpenTelemetry's database conventions, and how many of the keys were found.
  s.attributes.push_back({"db.system.name", std::string("redis")});
  s.attributes.push_back({"db.operation.name", std::string("MGET")});
  s.attributes.push_back({"db.operation.batch.size", r.keys});
  s.attributes.push_back({"tailcut.redis.hits", r.hits});
  if (r.failed) {
    s.error = true;
    s.status_message = "no answer from Redis (down, circuit open or timed out): computed instead";
  }
  return s;
}

}  // namespace

bool TraceSampled(std::string_view traceparent, std::string_view incoming, int64_t sample_ppm) {
  Parsed in;
  if (Parse(incoming, &in)) return in.sampled;
  Parsed own;
  if (!Parse(traceparent, &own)) return false;
  // The trace id's last 8 bytes as a number (W3C: random there), against the ratio.
  uint64_t v = 0;
  for (int i = 8; i < 16; ++i)
    v = v << 8 | static_cast<unsigned char>(own.trace_id[static_cast<size_t>(i)]);
  return static_cast<double>(v) / 18446744073709551616.0 * 1e6 < static_cast<double>(sample_ppm);
}

std::vector<SpanData> RequestSpans(const RequestSpanInput& in) {
  Parsed own;
  if (!Parse(in.traceparent, &own)) return {};
  Parsed caller;
  const bool has_caller =
      Parse(in.incoming_traceparent, &caller) && caller.trace_id == own.trace_id;
  const StageTimings& t = in.timings;
  const uint64_t total_nanos = static_cast<uint64_t>(std::max<int64_t>(t.total_micros, 0)) * 1000;
  const uint64_t start = in.end_unix_nanos - std::min(total_nanos, in.end_unix_nanos);

  std::vector<SpanData> spans;
  SpanData server;
  server.trace_id = own.trace_id;
  server.span_id = own.span_id;
  if (has_caller) server.parent_span_id = caller.span_id;
  server.name = std::string(in.method) + " " + std::string(in.route);
  server.kind = SpanData::Kind::kServer;
  server.start_unix_nanos = start;
  server.end_unix_nanos = in.end_unix_nanos;
  server.attributes.push_back({"http.route", std::string(in.route)});
  server.attributes.push_back({"http.request.method", std::string(in.method)});
  server.attributes.push_back({"http.response.status_code", static_cast<int64_t>(in.status)});
  if (!in.model.empty()) server.attributes.push_back({"tailcut.model", std::string(in.model)});
  if (!in.variant.empty())
    server.attributes.push_back({"tailcut.variant", std::string(in.variant)});
  if (in.cache_hits >= 0) server.attributes.push_back({"tailcut.cache_hits", in.cache_hits});
  if (t.batch_rows > 0) server.attributes.push_back({"tailcut.batch.size", t.batch_rows});
  if (in.status >= 500) {
    server.error = true;
    server.status_message = "status " + std::to_string(in.status);
  }
  spans.push_back(std::move(server));

  const std::pair<const char*, int64_t> stages[] = {
      {"parse", t.parse_micros},           {"tokenize", t.tokenize_micros},
      {"preprocess", t.preprocess_micros}, {"cache", t.cache_micros},
      {"queue", t.queue_micros},           {"batch", t.batch_micros},
      {"infer", t.infer_micros},           {"prefill", t.prefill_micros},
      {"decode", t.decode_micros},         {"serialize", t.serialize_micros}};
  uint64_t at = start;
  for (const auto& [name, micros] : stages) {
    if (micros <= 0) continue;
    SpanData s;
    s.trace_id = own.trace_id;
    s.span_id = NewSpanId();
    s.parent_span_id = own.span_id;
    s.name = std::string("tailcut.") + name;
    s.kind = SpanData::Kind::kInternal;
    s.start_unix_nanos = at;
    s.end_unix_nanos = std::min(at + static_cast<uint64_t>(micros) * 1000, in.end_unix_nanos);
    s.attributes.push_back({"tailcut.stage", std::string(name)});
    const std::string_view stage = name;
    if ((stage == "batch" || stage == "infer") && t.batch_rows > 0) {
      s.attributes.push_back({"tailcut.batch.size", t.batch_rows});
    }
    at = s.end_unix_nanos;
    spans.push_back(std::move(s));
    if (stage == "cache" && t.redis_lookup.keys > 0)
      spans.push_back(RedisLookupSpan(spans.back(), t));
  }
  return spans;
}

}  // namespace tailcut
