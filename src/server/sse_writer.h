// Server-sent events (text/event-stream, WHATWG HTML section 9.2) over a streamed HTTP
// response: each event is "data: <payload>\n\n" (one data line per payload line), written as
// one chunk so the client sees it as soon as it is produced. OpenAI ends its streams with
// "data: [DONE]"; Triton's generate_stream just ends.
//
// Thread-safety: the functions are pure. SseWriter's methods are safe from any thread (they
// only queue on the HttpStream, which serialises); they never block.
#pragma once

#include <string>
#include <string_view>

#include "server/http_server.h"

namespace tailcut {

// "data: <payload>\n\n"; a payload with line breaks becomes one data line per line (the
// client joins them with "\n"). JSON written without indentation has none.
std::string SseEvent(std::string_view payload);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

// The head of an event stream: 200, text/event-stream, and no caching or proxy buffering.
HttpResponse SseHead();

class SseWriter {
 public:
  explicit SseWriter(HttpStreamPtr stream) : stream_(std::move(stream)) {}
  // Sends one event; false once the stream is closed (the client is gone or too slow: the
  // exchange is cancelled, and the producer should stop).
  bool Send(std::string_view payload);
  // Sends "data: [DONE]" when `done_marker`, then ends the body.
  void End(bool done_marker);
  bool closed() const { return stream_->closed(); }

 private:
  const HttpStreamPtr stream_;
};

}  // namespace tailcut
