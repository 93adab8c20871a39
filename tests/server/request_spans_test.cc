// Tests for the spans a request becomes (src/server/request_spans.h): the trace and parent
// from the traceparents, a child per stage in order within the request, the attributes, and
// sampling by the caller's flag or the ratio.
#include "server/request_spans.h"

#include <gtest/gtest.h>

namespace tailcut {
namespace {

constexpr std::string_view kOurs = "00-4bf92f3577b34da6a3ce929d0e0e4736-1111111111111111-01";
constexpr std::string_view kCaller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

TEST(RequestSpansTest, AServerSpanInTheCallersTraceWithAChildPerStage) {
  RequestSpanInput in;
  in.route = "/v1/embeddings";
  in.method = "POST";
  in.model = "m";
  in.status = 200;
  in.traceparent = kOurs;
  in.incoming_traceparent = kCaller;
  in.variant = "fp32";
  in.cache_hits = 0;
  in.end_unix_nanos = 10'000'000'000;
  in.timings.parse_micros = 10;
  in.timings.queue_micros = 100;
  in.timings.infer_micros = 500;
  in.timings.total_micros = 1000;
  auto spans = RequestSpans(in);
  ASSERT_EQ(spans.size(), 4u);  // Server + the three stages with time.
  const SpanData& server = spans[0];
  EXPECT_EQ(server.kind, SpanData::Kind::kServer);
  EXPECT_EQ(server.name, "POST /v1/embeddings");
  EXPECT_EQ(server.trace_id.size(), 16u);
  EXPECT_EQ(server.span_id, std::string(8, '\x11'));
  EXPECT_EQ(server.parent_span_id, std::string("\x00\xf0\x67\xaa\x0b\xa9\x02\xb7", 8));
  EXPECT_EQ(server.end_unix_nanos - server.start_unix_nanos, 1'000'000u);
  EXPECT_FALSE(server.error);
  uint64_t at = server.start_unix_nanos;
  const char* names[] = {"tailcut.parse", "tailcut.queue", "tailcut.infer"};
  for (size_t i = 1; i < spans.size(); ++i) {
    EXPECT_EQ(spans[i].name, names[i - 1]);
    EXPECT_EQ(spans[i].parent_span_id, server.span_id);
    EXPECT_EQ(spans[i].trace_id, server.trace_id);
    EXPECT_EQ(spans[i].start_unix_nanos, at);  // In order, one after the other.
    at = spans[i].end_unix_nanos;
    EXPECT_LE(at, server.end_unix_nanos);
  }
  EXPECT_EQ(spans[3].end_unix_nanos - spans[3].start_unix_nanos, 500'000u);
}

// The attribute `key` of `span`, or nullptr.
const SpanAttributeValue* Attribute(const SpanData& span, std::string_view key) {
  for (const auto& a : span.attributes) {
    if (a.key == key) return &a.value;
  }
  return nullptr;
}

TEST(RequestSpansTest, TheRedisLookupIsAClientSpanInsideTheCacheStageAndBatchesTellTheirSize) {
  RequestSpanInput in;
  in.route = "/v1/embeddings";
  in.method = "POST";
  in.traceparent = kOurs;
  in.end_unix_nanos = 10'000'000'000;
  in.timings.parse_micros = 10;
  in.timings.cache_micros = 300;
  in.timings.infer_micros = 500;
  in.timings.total_micros = 1000;
  in.timings.batch_rows = 6;
  in.timings.redis_lookup = {.micros = 250, .keys = 2, .hits = 1, .failed = false};
  auto spans = RequestSpans(in);
  // Server, parse, cache, MGET (right after its cache stage), infer.
  ASSERT_EQ(spans.size(), 5u);
  const SpanData& cache = spans[2];
  const SpanData& redis = spans[3];
  EXPECT_EQ(cache.name, "tailcut.cache");
  EXPECT_EQ(redis.name, "MGET");
  EXPECT_EQ(redis.kind, SpanData::Kind::kClient);
  EXPECT_EQ(redis.parent_span_id, cache.span_id);
  EXPECT_EQ(redis.end_unix_nanos, cache.end_unix_nanos);
  EXPECT_EQ(redis.end_unix_nanos - redis.start_unix_nanos, 250'000u);
  EXPECT_FALSE(redis.error);
  ASSERT_NE(Attribute(redis, "db.system.name"), nullptr);
  EXPECT_EQ(std::get<std::string>(*Attribute(redis, "db.system.name")), "redis");
  EXPECT_EQ(std::get<int64_t>(*Attribute(redis, "db.operation.batch.size")), 2);
  EXPECT_EQ(std::get<int64_t>(*Attribute(redis, "tailcut.redis.hits")), 1);
  EXPECT_EQ(std::get<int64_t>(*Attribute(spans[0], "tailcut.batch.size")), 6);
  EXPECT_EQ(spans[4].name, "tailcut.infer");
  EXPECT_EQ(std::get<int64_t>(*Attribute(spans[4], "tailcut.batch.size")), 6);
  EXPECT_EQ(Attribute(cache, "tailcut.batch.size"), nullptr);

  // A lookup longer than its stage (clocks read at different points) stays inside it; one
  // that failed is an error span; no lookup, no span.
  in.timings.redis_lookup = {.micros = 900, .keys = 1, .hits = 0, .failed = true};
  spans = RequestSpans(in);
  ASSERT_EQ(spans.size(), 5u);
  EXPECT_EQ(spans[3].start_unix_nanos, spans[2].start_unix_nanos);
  EXPECT_TRUE(spans[3].error);
  in.timings.redis_lookup = {};
  in.timings.batch_rows = 0;
  spans = RequestSpans(in);
  ASSERT_EQ(spans.size(), 4u);
  EXPECT_EQ(Attribute(spans[0], "tailcut.batch.size"), nullptr);
}

TEST(RequestSpansTest, ARootSpanWithoutACallerAndAnErrorStatusForA5xx) {
  RequestSpanInput in;
  in.route = "/v1/embeddings";
  in.method = "POST";
  in.status = 503;
  in.traceparent = kOurs;
  in.end_unix_nanos = 5'000;
  in.timings.total_micros = 1'000'000;  // Longer than the clock: clamped, no wrap-around.
  auto spans = RequestSpans(in);
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_TRUE(spans[0].parent_span_id.empty());
  EXPECT_TRUE(spans[0].error);
  EXPECT_EQ(spans[0].start_unix_nanos, 0u);
  in.traceparent = "not a traceparent";
  EXPECT_TRUE(RequestSpans(in).empty());
}

TEST(RequestSpansTest, SamplingFollowsTheCallerElseTheRatio) {
  const std::string_view unsampled = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00";
  EXPECT_TRUE(TraceSampled(kOurs, kCaller, 0));
  EXPECT_FALSE(TraceSampled(kOurs, unsampled, 1'000'000));
  EXPECT_TRUE(TraceSampled(kOurs, "", 1'000'000));
  EXPECT_FALSE(TraceSampled(kOurs, "", 0));
  EXPECT_FALSE(TraceSampled(kOurs, "garbage", 0));
  // The trace id's low half decides: 0x...ff is near 0 of 2^64, 0xff...ff near all of it.
  EXPECT_TRUE(TraceSampled("00-000000000000000100000000000000ff-1111111111111111-01", "", 1));
  EXPECT_FALSE(
      TraceSampled("00-0000000000000001ffffffffffffffff-1111111111111111-01", "", 999'999));
}

TEST(TraceExporterTest, EncodesAnExportRequest) {
  SpanData s;
  s.trace_id = std::string(16, '\x01');
  s.span_id = std::string(8, '\x02');
  s.name = "POST /x";
  s.kind = SpanData::Kind::kServer;
  s.attributes.push_back({"n", int64_t{3}});
  const std::string bytes = TraceExporter::Encode({s}, "svc");
  EXPECT_NE(bytes.find("svc"), std::string::npos);
  EXPECT_NE(bytes.find("POST /x"), std::string::npos);
  EXPECT_NE(bytes.find(std::string(16, '\x01')), std::string::npos);
}

}  // namespace
}  // namespace tailcut
