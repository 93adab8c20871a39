#include "server/sse_writer.h"

namespace tailcut {

std::string SseEvent(std::string_view payload) {
  std::string out;
  out.reserve(payload.size() + 8);
  size_t start = 0;
  while (true) {
    const size_t end = payload.find_first_of("\r\n", start);
    out += "data: ";
    out += payload.substr(start, end - start);
    out += '\n';
    if (end == std::string_view::npos) break;
    // "\r\n" is one line break.
    start = end + ((payload[end] == '\r' && end + 1 < payload.size() && payload[end + 1] == '\n')
                       ? 2
                       : 1);
    if (start >= payload.size()) break;
  }
  out += '\n';
  return out;
}

HttpResponse SseHead() {
  HttpResponse head;
  head.content_type = "text/event-stream; charset=utf-8";
  head.headers.emplace_back("Cache-Control", "no-cache");
  // nginx buffers proxied responses unless told not to; events must go out as they come.
  head.headers.emplace_back("X-Accel-Buffering", "no");
  return head;
}

bool SseWriter::Send(std::string_view payload) { return stream_->Write(SseEvent(payload)); }

void SseWriter::End(bool done_marker) {
  if (done_marker) stream_->Write(std::string(kSseDone));
  stream_->Finish();
}

}  // namespace tailcut
