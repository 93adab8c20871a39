// StageTimings: where one request's time went, stage by stage, in microseconds. Filled as
// the request moves through the server and reported in the Server-Timing header and the
// per-stage latency histograms, so a slow request explains itself.
//
// For a request whose inputs ran in several batches, queue/batch/infer are the largest
// values over its batches: the slowest batch is what the client waited for.
//
// Thread-safety: plain value type.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>

namespace tailcut {

struct StageTimings {
  int64_t parse_micros = 0;      // Reading the JSON body into a request.
  int64_t tokenize_micros = 0;   // Text to token ids (the request's work-pool thread).
  // Encoded images to the model's input tensor: decode, resize, normalise (the request's
  // work-pool thread). In Server-Timing only when an image was decoded.
  int64_t preprocess_micros = 0;
  int64_t cache_micros = 0;      // Cache lookups before queueing.
  int64_t queue_micros = 0;      // Waiting in the batcher's queue.
  int64_t batch_micros = 0;      // Forming the batch and filling the padded input buffers.
  int64_t infer_micros = 0;      // The model run of the batch.
  int64_t serialize_micros = 0;  // Writing the response body.
  // Generation only (core/generation.h): admission to the first generated token, and the first
  // token to the end. Not in ToServerTiming(): a stream's headers go out before either is known.
  int64_t prefill_micros = 0;
  int64_t decode_micros = 0;
  int64_t total_micros = 0;  // From the last request byte read to the response ready.

  // What the stages above did, for the request's trace (not in Server-Timing):
  // Rows in the batch its inputs ran in (the largest over its batches: other requests' rows
  // included); 0 = nothing of it was batched (all from a cache, or a generation).
  int64_t batch_rows = 0;
  // The Redis (L2) lookup inside the cache stage: one MGET of `keys` keys, `hits` of them
  // found; micros = call to answer. keys == 0: Redis was not asked (off, bypassed, or every
  // input found in L1). For several lookups (inputs resolved on different paths): the longest.
  struct RedisLookup {
    int64_t micros = 0;
    int64_t keys = 0;
    int64_t hits = 0;
    bool failed = false;  // Unanswered (down, circuit open, timeout): the inputs were computed.
  };
  RedisLookup redis_lookup;

  // "parse;dur=0.012, tokenize;dur=0.030, ..." in milliseconds (Server-Timing syntax).
  std::string ToServerTiming() const;
};

// Stages (name, microseconds), in order, as a Server-Timing header value in milliseconds.
std::string FormatServerTiming(std::span<const std::pair<const char*, int64_t>> stages);

}  // namespace tailcut
