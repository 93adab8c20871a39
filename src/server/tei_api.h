// Hugging Face Text Embeddings Inference (TEI) compatible routes: POST /embed, POST /rerank
// (a reranker model: a query scored against texts), GET /info, GET /health. Follows TEI's defaults:
// `normalize` true, `truncate` false (an over-long input is a 413, not silently cut), and the
// response is always an array of arrays.
//
// Thread-safety: as for the OpenAI routes.
#pragma once

#include "server/api_context.h"
#include "server/router.h"

namespace tailcut {

struct TeiOptions {
  // Reported by /info; TEI clients size their batches by these.
  int max_concurrent_requests = 512;
  int max_client_batch_size = 2048;
};

void AddTeiRoutes(Router& router, ApiContext& context, const TeiOptions& options);

}  // namespace tailcut
