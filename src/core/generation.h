// Generation through the core API: what a front-end (OpenAI completions and chat, KServe v2's
// generate extension) asks of a generative model, and the sink its answer streams into.
//
// One request produces, on its sink, OnStart() once when the request is admitted (before any
// text: a streaming front-end sends its headers there), OnText() for each piece of generated
// text, then OnEnd() exactly once (the finish reason and usage, or the error). A request
// refused before admission (bad input, unknown model, overload) gets only OnEnd() with the
// error. Sink calls come from the generation step loop, one request's calls never
// concurrently: they must be quick and must never block (append to a bounded buffer, hand
// to IO), as every running sequence waits for them.
//
// Thread-safety: the types here are plain values; see GenerationSink for its calls.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/cancellation.h"
#include "common/status.h"
#include "core/stage_timings.h"
#include "engine/generative_model.h"
#include "engine/sampler.h"

namespace tailcut {

struct GenerateRequest {
  std::string model;  // A model name or alias; "default" = the default generative model.
  // Either a raw prompt (completions; tokenised with the model's BOS where it wants one) or
  // chat messages (rendered with the model's chat template, ending with an open assistant
  // turn). Exactly one of them is used: messages when `chat` is set.
  std::string prompt;
  std::vector<ChatMessage> messages;
  bool chat = false;
  // A precision variant pin: a variant name or a GGUF type alias ("q8_0"), as the embedding
  // requests' `precision`; empty = the precision controller's choice. The answer names the
  // variant either way (GenerationStart::variant).
  std::string precision;
  SamplingParams sampling;
  // Most tokens to generate. 0 = unset: a sequence's share of the KV cache (context tokens /
  // max sequences) less the prompt, at least a quarter share, never past the context. A
  // request whose prompt plus max_tokens exceeds the context is refused (kInvalidArgument
  // naming both numbers).
  int32_t max_tokens = 16;
  // Generation ends, finish_reason "stop", at the model's end-of-generation token or when the
  // text contains one of these strings (the stop string itself is not returned).
  std::vector<std::string> stop;
  // Return each piece's log-probability (GenerationPiece::logprob).
  bool logprobs = false;
  int64_t received_micros = 0;  // When the request arrived (SystemClock).
  int64_t deadline_micros = 0;  // Absolute (SystemClock); 0 = the server default.
  // Set when the client goes away: the sequence ends at the next step and its KV cells are
  // freed; the sink then gets OnEnd(kCancelled).
  CancellationFlag cancellation;
  StageTimings timings;  // Stages already spent (parse) before the call.
  // The semantic output cache (core/semantic_output_cache.h): false for Cache-Control
  // no-cache (do not answer from it) and no-store (do not store this answer).
  bool cache_read = true;
  bool cache_write = true;
};

// Sent once, when the request is admitted into the running set.
struct GenerationStart {
  std::string model;    // Canonical model name.
  std::string variant;  // The precision variant (GGUF file) generating it.
  int32_t prompt_tokens = 0;
  int64_t queue_micros = 0;  // From the call to admission.
  // Set when the answer comes from the semantic output cache instead of the model: "exact"
  // (the same query text) or "semantic" (a query the cache judged the same question), the
  // cosine of the two queries' embeddings (1 for exact), and the cached answer's age.
  std::string cache;
  float cache_similarity = 0;
  int64_t cache_age_millis = 0;
};

// One piece of generated text: usually one token's, but a piece may hold several tokens
// (text held back until an incomplete UTF-8 character or a possible stop string resolved) or
// be empty for a token whose text is held back.
struct GenerationPiece {
  std::string text;
  int32_t tokens = 1;    // Generated tokens this piece accounts for.
  float logprob = 0.0f;  // Of the last token, when GenerateRequest::logprobs.
};

struct GenerationUsage {
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  int32_t cached_prompt_tokens = 0;  // Prompt tokens whose KV cells a shared prefix supplied.
};

struct GenerationEnd {
  std::string model;
  std::string variant;
  std::string finish_reason;  // "stop" (end token or stop string) or "length" (max_tokens).
  GenerationUsage usage;
  // queue, prefill (admission to first token) and decode (first token to end), microseconds.
  StageTimings timings;
};

class GenerationSink {
 public:
  virtual ~GenerationSink() = default;
  virtual void OnStart(const GenerationStart& start) = 0;
  virtual void OnText(const GenerationPiece& piece) = 0;
  // Exactly once, last. An error after OnStart() ends a started stream (a streaming
  // front-end sends it as an error event); before OnStart() it is the whole answer.
  virtual void OnEnd(Result<GenerationEnd> end) = 0;
};

using GenerationSinkPtr = std::shared_ptr<GenerationSink>;

}  // namespace tailcut
