// OpenAI-compatible generation routes: POST /v1/completions and POST /v1/chat/completions,
// streamed (server-sent events, `"stream": true`) or not. Thin: JSON to GenerateRequest, and
// the core's pieces to OpenAI's response and chunk objects; tokenising, the chat template,
// batching and sampling are the core's.
//
// Request fields: model, prompt (a string, or a list of one) or messages (system, user,
// assistant or developer turns; content a string or a list of text parts), max_tokens /
// max_completion_tokens, temperature (0..2), top_p, top_k (extension), seed, stop (up to 4),
// presence_penalty / frequency_penalty (-2..2), n (1 only), logprobs (completions: 0, the
// sampled tokens' log-probabilities; chat: true, with top_logprobs 0), stream,
// stream_options.include_usage, user (ignored). Header X-Request-Timeout-Ms sets a deadline.
// Each logprobs entry is one piece of the core's output (usually one token). max_tokens
// defaults as OpenAI's do: 16 for completions, none for chat (until the answer ends or the
// context is full).
//
// Errors before the stream starts are OpenAI error objects with their HTTP status; after it
// started, an event `data: {"error": {...}}`, and the body ends (no [DONE]).
//
// Thread-safety: handlers run on work-pool threads; sinks on the generation step loop
// (server/generation_sink.h). They share only the ApiContext, which is thread-safe.
#pragma once

#include "server/api_context.h"
#include "server/router.h"

namespace tailcut {

void AddOpenAiGenerationRoutes(Router& router, ApiContext& context);

}  // namespace tailcut
