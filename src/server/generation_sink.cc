#include "server/generation_sink.h"

#include <cstdio>

namespace tailcut {

namespace {
// X-Tailcut-Variant, and for an answer from the semantic output cache X-Tailcut-Cache (exact
// or semantic), the similarity of the two queries and the cached answer's age.
void AddGenerationHeaders(const GenerationStart& start, HttpResponse* res) {
  if (!start.variant.empty()) res->headers.emplace_back("X-Tailcut-Variant", start.variant);
  if (start.cache.empty()) return;
  res->headers.emplace_back("X-Tailcut-Cache", start.cache);
  char similarity[32];
  std::snprintf(similarity, sizeof(similarity), "%.4f", start.cache_similarity);
  res->headers.emplace_back("X-Tailcut-Cache-Similarity", similarity);
  res->headers.emplace_back("X-Tailcut-Cache-Age-Ms", std::to_string(start.cache_age_millis));
}
}  // namespace

void FinishGenerated(ApiContext& context, const HttpExchangePtr& exchange, std::string_view route,
                     const GeneratedText& answer, std::string body, int64_t format_start_micros) {
  HttpResponse res;
  res.body = std::move(body);
  AddGenerationHeaders(answer.start, &res);
  StageTimings t = answer.timings;
  t.serialize_micros = context.clock().NowMicros() - format_start_micros;
  const std::string server_timing = GenerationServerTiming(t);
  context.Finish(exchange, route, answer.start.model, std::move(res), t, server_timing);
}

std::string GenerationServerTiming(const StageTimings& t) {
  const std::pair<const char*, int64_t> stages[] = {{"parse", t.parse_micros},
                                                    {"queue", t.queue_micros},
                                                    {"prefill", t.prefill_micros},
                                                    {"decode", t.decode_micros},
                                                    {"serialize", t.serialize_micros}};
  return FormatServerTiming(stages);
}

namespace {

// Fills prefill and decode from the sink's clock readings (0 where a stage never began).
void FinishTimings(int64_t start, int64_t first_piece, int64_t end, StageTimings* t) {
  if (start == 0) return;
  const int64_t first = first_piece != 0 ? first_piece : end;
  t->prefill_micros = first - start;
  t->decode_micros = end - first;
}

}  // namespace

StreamingGenerationSink::StreamingGenerationSink(ApiContext& context, HttpExchangePtr exchange,
                                                 GenerationRoute route,
                                                 std::unique_ptr<GenerationEvents> events)
    : context_(context),
      exchange_(std::move(exchange)),
      route_(std::move(route)),
      events_(std::move(events)) {
  timings_.parse_micros = route_.parse_micros;
}

void StreamingGenerationSink::OnStart(const GenerationStart& start) {
  start_micros_ = context_.clock().NowMicros();
  model_ = start.model;
  timings_.queue_micros = start.queue_micros;
  HttpResponse head = SseHead();
  AddGenerationHeaders(start, &head);
  traceparent_ = TraceparentFor(exchange_->header("traceparent"));
  head.headers.emplace_back("traceparent", traceparent_);
  HttpStreamPtr stream = exchange_->StartStream(std::move(head));
  if (!stream) return;  // Answered already (cannot happen: only this sink answers).
  writer_.emplace(std::move(stream));
  for (const std::string& event : events_->Start(start)) writer_->Send(event);
}

void StreamingGenerationSink::OnText(const GenerationPiece& piece) {
  if (first_piece_micros_ == 0) first_piece_micros_ = context_.clock().NowMicros();
  // A closed stream has cancelled the request; the core ends it at its next step.
  if (!writer_ || writer_->closed()) return;
  const std::string event = events_->Text(piece);
  if (!event.empty()) writer_->Send(event);
}

void StreamingGenerationSink::OnEnd(Result<GenerationEnd> end) {
  FinishTimings(start_micros_, first_piece_micros_, context_.clock().NowMicros(), &timings_);
  if (!writer_) {
    // Refused before admission: an ordinary JSON error with its status.
    const Status status =
        end.ok() ? Status::Internal("generation ended without being admitted") : end.status();
    return context_.FinishError(exchange_, route_.route, route_.requested_model, status,
                                route_.style, timings_);
  }
  unsigned status = 200;
  if (end.ok()) {
    for (const std::string& event : events_->End(*end)) writer_->Send(event);
    writer_->End(events_->done_marker());
  } else {
    // The status line went out with the head: the error travels as an event, and the body
    // ends without the done marker.
    status = HttpStatusFor(end.status().code());
    writer_->Send(events_->Error(end.status()));
    writer_->End(false);
  }
  context_.RecordStreamed(*exchange_, route_.route, model_, status, timings_,
                          GenerationServerTiming(timings_), traceparent_);
}

CollectingGenerationSink::CollectingGenerationSink(ApiContext& context, bool keep_pieces,
                                                   int64_t parse_micros, Done done)
    : context_(context), keep_pieces_(keep_pieces), done_(std::move(done)) {
  result_.timings.parse_micros = parse_micros;
}

void CollectingGenerationSink::OnStart(const GenerationStart& start) {
  start_micros_ = context_.clock().NowMicros();
  started_ = true;
  result_.start = start;
  result_.timings.queue_micros = start.queue_micros;
}

void CollectingGenerationSink::OnText(const GenerationPiece& piece) {
  if (first_piece_micros_ == 0) first_piece_micros_ = context_.clock().NowMicros();
  result_.text += piece.text;
  if (keep_pieces_) result_.pieces.push_back(piece);
}

void CollectingGenerationSink::OnEnd(Result<GenerationEnd> end) {
  FinishTimings(start_micros_, first_piece_micros_, context_.clock().NowMicros(), &result_.timings);
  Result<GeneratedText> answer = Status::Internal("generation ended without being admitted");
  if (!end.ok()) {
    answer = end.status();
  } else if (started_) {
    result_.end = std::move(end).value();
    answer = std::move(result_);
  }
  // Formatting the answer (the whole text, maybe logprobs) is the work pool's job.
  context_.RunOnWorkPool(
      [done = std::move(done_), answer = std::move(answer)]() mutable { done(std::move(answer)); });
}

}  // namespace tailcut
