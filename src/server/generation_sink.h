// The GenerationSinks the HTTP front-ends hand to InferenceApi::Generate (core/generation.h):
//
//   StreamingGenerationSink  answers with server-sent events: the head when the request is
//                            admitted (OnStart), one event per piece of text, the front-end's
//                            final events, then the end of the body. Each API's event shapes
//                            come from its GenerationEvents. A request refused before admission
//                            gets the API's JSON error with its status instead; an error after
//                            admission is an error event, and the body ends there.
//   CollectingGenerationSink gathers the whole answer for a non-streaming response and hands
//                            it to the work pool, where the front-end formats it.
//
// Both time the stages a generation's Server-Timing reports: queue (call to admission, from
// the core), prefill (admission to the first piece) and decode (first piece to the end).
//
// Thread-safety: the sinks' calls come from the generation step loop, one at a time per
// request, and never block: a streamed event is formatted (one small JSON object) and queued
// on the HttpStream, which never waits for the client (a slow one is cut off at
// HttpServerOptions::max_stream_buffer_bytes, which cancels the request); everything larger
// runs on the work pool.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/generation.h"
#include "server/api_context.h"
#include "server/http_errors.h"
#include "server/sse_writer.h"

namespace tailcut {

// A generation's stages as Server-Timing: "parse;dur=.., queue;dur=.., prefill;dur=..,
// decode;dur=.., serialize;dur=.." (ms); the total is appended by ApiContext::Finish().
std::string GenerationServerTiming(const StageTimings& timings);

// One API's streamed event payloads (JSON text, without the SSE framing). Called on the step
// loop: each must be quick.
class GenerationEvents {
 public:
  virtual ~GenerationEvents() = default;
  // Events sent when the request is admitted, before any text (OpenAI chat's role delta).
  virtual std::vector<std::string> Start(const GenerationStart& start) = 0;
  // The event for one piece; empty for none (a piece whose text is held back).
  virtual std::string Text(const GenerationPiece& piece) = 0;
  // The events that end a successful stream (finish reason, usage).
  virtual std::vector<std::string> End(const GenerationEnd& end) = 0;
  // The event for an error after the stream started.
  virtual std::string Error(const Status& status) = 0;
  // Whether the stream ends with "data: [DONE]" (OpenAI) or just ends (Triton).
  virtual bool done_marker() const = 0;
};

struct GenerationRoute {
  std::string route;            // The route pattern, for metrics.
  std::string requested_model;  // As the client named it (metrics label, errors).
  ErrorStyle style = ErrorStyle::kOpenAi;
  int64_t parse_micros = 0;
};

class StreamingGenerationSink final : public GenerationSink {
 public:
  StreamingGenerationSink(ApiContext& context, HttpExchangePtr exchange, GenerationRoute route,
                          std::unique_ptr<GenerationEvents> events);
  void OnStart(const GenerationStart& start) override;
  void OnText(const GenerationPiece& piece) override;
  void OnEnd(Result<GenerationEnd> end) override;

 private:
  ApiContext& context_;
  const HttpExchangePtr exchange_;
  const GenerationRoute route_;
  const std::unique_ptr<GenerationEvents> events_;
  std::optional<SseWriter> writer_;  // From OnStart().
  std::string model_;                // Canonical, from OnStart().
  std::string traceparent_;
  StageTimings timings_;
  int64_t start_micros_ = 0;
  int64_t first_piece_micros_ = 0;
};

// The whole answer of a non-streamed generation.
struct GeneratedText {
  GenerationStart start;
  std::string text;
  // Each piece's text and log-probability, when the request asked for logprobs (else empty).
  std::vector<GenerationPiece> pieces;
  GenerationEnd end;
  StageTimings timings;  // parse, queue, prefill, decode (serialize is the caller's).
};

// Sends a collected answer whose body `body` was just formatted (from `format_start_micros`):
// the X-Tailcut-Variant header, the serialize stage, Server-Timing and the request metrics.
void FinishGenerated(ApiContext& context, const HttpExchangePtr& exchange,
                     std::string_view route, const GeneratedText& answer, std::string body,
                     int64_t format_start_micros);

class CollectingGenerationSink final : public GenerationSink {
 public:
  using Done = std::function<void(Result<GeneratedText>)>;
  // `done` runs once, on the work pool: with the answer, or with the error that refused or
  // ended it (a non-streamed answer is all or nothing).
  CollectingGenerationSink(ApiContext& context, bool keep_pieces, int64_t parse_micros,
                           Done done);
  void OnStart(const GenerationStart& start) override;
  void OnText(const GenerationPiece& piece) override;
  void OnEnd(Result<GenerationEnd> end) override;

 private:
  ApiContext& context_;
  const bool keep_pieces_;
  Done done_;
  GeneratedText result_;
  bool started_ = false;
  int64_t start_micros_ = 0;
  int64_t first_piece_micros_ = 0;
};

}  // namespace tailcut
