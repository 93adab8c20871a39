// Triton's generate extension on the KServe v2 routes, for generative models:
//   POST /v2/models/{name}/generate         {"text_input": "...", "parameters": {...}}
//                                           -> {"model_name", "model_version", "text_output"}
//   POST /v2/models/{name}/generate_stream  the same request; server-sent events, each
//                                           data: {"model_name", "model_version",
//                                           "text_output": <piece>}; an error after the
//                                           stream started is data: {"error": "..."}.
// `parameters` takes max_tokens, temperature, top_p, top_k, seed, stop, presence_penalty,
// frequency_penalty (OpenAI's ranges) and stream (true only on generate_stream); other
// parameters are ignored, as Triton passes them to backends that may not know them either.
// Errors before a stream starts are KServe error objects ({"error": "..."}) with the status
// of server/http_errors.h.
//
// Thread-safety: as for the OpenAI routes (server/openai_generation_api.h).
#pragma once

#include <nlohmann/json.hpp>

#include "server/api_context.h"
#include "server/router.h"

namespace tailcut {

void AddKServeGenerateRoutes(Router& router, ApiContext& context);

// Reads a generate request's `parameters` object (above) into `request`: the sampling
// settings, the precision pin, and `stream`, which may be true only where `stream_allowed`.
// Errors name the field as "parameters.<name>". Shared by generate and by infer on a
// generative model (HTTP and gRPC), so the three read one set of parameters one way.
Status ReadKServeGenerateParameters(const nlohmann::json& params, bool stream_allowed,
                                    GenerateRequest* request);

}  // namespace tailcut
