// ServerRoutes: the complete route table of `tailcut serve`: the three inference APIs (with
// OpenAI's and Triton's generation routes) plus the operational routes (/metrics). Kept apart
// from the serve command so integration tests and fuzzers can build the same router.
//
// Thread-safety: build once before the server starts.
#pragma once

#include "server/api_context.h"
#include "server/router.h"
#include "server/tei_api.h"

namespace tailcut {

void AddAllRoutes(Router& router, ApiContext& context, const TeiOptions& tei);

}  // namespace tailcut
