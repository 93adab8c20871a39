// OpenAI-compatible routes: POST /v1/embeddings, GET /v1/models, GET /v1/models/{model}.
// Thin: JSON to EmbedRequest, EmbedResult to JSON; everything else is the core's.
//
// Extensions beyond OpenAI's schema, all optional: `precision` (pin a variant), header
// X-Request-Timeout-Ms (deadline), Cache-Control no-cache / no-store.
//
// Thread-safety: handlers run on work-pool threads and answer from the pool too (ApiContext
// hands results there); they share only the ApiContext, which is thread-safe.
#pragma once

#include "server/api_context.h"
#include "server/router.h"

namespace tailcut {

void AddOpenAiRoutes(Router& router, ApiContext& context);

}  // namespace tailcut
