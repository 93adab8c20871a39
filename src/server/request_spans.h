// The spans one answered request becomes (OpenTelemetry, exported by obs/trace_exporter.h):
// a server span for the whole request, in the trace of its W3C traceparent, with one child
// span per stage it spent time in (parse, tokenize, cache, queue, batch, infer, prefill,
// decode, serialize: Server-Timing's order). The stages' durations are the ones the request
// measured (the same as Server-Timing); their starts are placed in pipeline order from the
// request's arrival, as StageTimings keeps durations, not instants. Under the cache stage, a client
// span for the Redis lookup (MGET) when one was made; the batch and infer spans (and the server
// span) carry the batch's row count, other requests' rows included.
//
// Sampling follows the caller: a valid incoming traceparent's sampled flag decides; a trace
// started here is sampled when its trace id falls under `sample_ppm` parts per million.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/stage_timings.h"
#include "obs/trace_exporter.h"

namespace tailcut {

struct RequestSpanInput {
  std::string_view route;
  std::string_view method;
  std::string_view model;
  unsigned status = 200;
  std::string_view traceparent;           // The answer's: this server's span.
  std::string_view incoming_traceparent;  // The caller's, if any.
  std::string_view variant;               // The precision variant that computed it, if known.
  int64_t cache_hits = -1;                // Rows answered from a cache; -1 = not a cached kind.
  uint64_t end_unix_nanos = 0;
  StageTimings timings;  // total_micros filled in.
};

// Whether the request's trace is exported.
bool TraceSampled(std::string_view traceparent, std::string_view incoming_traceparent,
                  int64_t sample_ppm);

// The server span and its stage spans; empty when `traceparent` is not a valid one.
std::vector<SpanData> RequestSpans(const RequestSpanInput& input);

}  // namespace tailcut
