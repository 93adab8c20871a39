// KServe v2 / Triton model-repository routes: what a client asks about the models before it
// infers, answered in the shapes Triton gives them (tritonclient.http reads them in the tests).
//   GET  /v2/models/{name}           metadata: the tensors infer takes and gives
//   GET  /v2/models/{name}/ready
//   GET  /v2/models/{name}/config    Triton's model configuration, as JSON
//   GET  /v2/models/{name}/stats     Triton's statistics extension (also /v2/models/stats)
//   POST /v2/repository/index        every model with its state
// Metadata describes the protocol's tensors, not the engine's: a text-embedding model takes
// one BYTES tensor of texts and gives "embedding" (its ONNX graph's token tensors are under
// "engine_inputs"/"engine_outputs"), a generative model takes "text_input" and gives
// "text_output" (the generate extension), and a tensor model's are its graph's.
//
// Thread-safety: as for the other routes.
#pragma once

#include "server/api_context.h"
#include "server/router.h"

namespace tailcut {

void AddKServeModelRoutes(Router& router, ApiContext& context);

}  // namespace tailcut
