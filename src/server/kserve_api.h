// KServe v2 / Triton-compatible routes (JSON over HTTP):
//   GET  /v2, /v2/health/live, /v2/health/ready
//   POST /v2/models/{name}/infer
// (the model-repository routes, metadata included, are in kserve_model_api.h)
// Any ONNX model in the repository is served with typed JSON tensors ("data" flat or
// nested, checked against "shape" and "datatype"). A text-embedding model also answers
// here: one BYTES input of texts gives an FP32 [n, dim] output named "embedding". So does a
// generative model, as Triton's LLM backends do: one BYTES "text_input" of one prompt and
// generate's parameters (kserve_generate_api.h) give the whole answer as "text_output".
//
// Thread-safety: as for the OpenAI routes.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

#include "server/api_context.h"
#include "server/router.h"

namespace tailcut {

void AddKServeRoutes(Router& router, ApiContext& context);

// Exposed for tests and fuzzing: converts one KServe JSON input tensor to a Tensor, or
// an error naming the tensor and the problem. With `binary` (Triton's binary extension,
// kserve_binary.h), the elements are those bytes instead of "data" (KServeBinaryInputs
// refuses an input that has both).
Result<Tensor> ParseKServeTensor(const nlohmann::json& input, size_t index,
                                 const std::string_view* binary = nullptr);
// OK, or the Internal error for the first NaN or infinity in a floating-point output: a
// working model does not produce them, and no transport should pass them on as if it had.
Status CheckFiniteOutput(const Tensor& t);
// Appends `t` as a KServe output tensor object. A NaN or infinity (which JSON cannot carry,
// and which a working model does not produce) is an Internal error naming the output and the
// element, and nothing is appended. With `binary`, the object says binary_data_size and the
// elements are appended to `binary` instead of written as "data".
Status AppendKServeTensor(const Tensor& t, std::string* out, std::string* binary = nullptr);

}  // namespace tailcut
