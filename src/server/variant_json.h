// How the server tells clients which precision variant answered and which vector space a
// model's vectors live in. Every API states it the same way: the X-Tailcut-Variant header on
// each embedding response (and a `variant` response parameter on KServe), and a `precision`
// object in model metadata (KServe /v2/models/{m}, OpenAI /v1/models, TEI /info).
//
// Thread-safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>

#include "core/inference_api.h"
#include "server/http_server.h"

namespace tailcut {

// X-Tailcut-Variant (ServedVariants) and X-Tailcut-Cache-Hits for an embedding result.
void AddVariantHeaders(const EmbedResult& result, HttpResponse* response);

// {"vector_space": default variant, "active_variant", "policy", "controller", "switches",
//  "fidelity_floor": {min_cosine, recall_at_10, waived}, "variants": [{name, precision, loaded,
//  file_digest, batch_invariant, fidelity_min_cosine, fidelity_recall_at_10, interchangeable,
//  why_not_interchangeable?, error?}]}.
nlohmann::json PrecisionJson(const ModelDescription& d);

}  // namespace tailcut
