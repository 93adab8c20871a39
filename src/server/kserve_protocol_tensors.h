// What KServe v2 clients see of a model's tensors, for every transport (HTTP metadata and
// config, gRPC ModelMetadata): the protocol's tensors, not the engine's. A text-embedding
// model takes one BYTES tensor of texts ("text") and gives "embedding"; a generative model
// takes "text_input" and gives "text_output" (the generate extension); a tensor model's are
// its graph's.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/inference_api.h"

namespace tailcut {

struct ProtocolTensor {
  std::string name;
  std::string datatype;        // KServe: "FP32", "BYTES", ...
  std::vector<int64_t> shape;  // -1 = any size.
};

// The engine's tensors, as the protocol names them (a tensor model's are the protocol's).
std::vector<ProtocolTensor> ProtocolTensorsFromSpecs(const std::vector<TensorSpec>& specs);

// What infer (or generate) takes and gives for a model of this kind.
void ProtocolTensors(const ModelDescription& d, std::vector<ProtocolTensor>* inputs,
                     std::vector<ProtocolTensor>* outputs);

// Triton's "platform" for the model.
std::string_view ProtocolPlatform(const ModelDescription& d);

// For the models whose infer takes one BYTES input (text-embedding: texts; generative: one
// prompt), the error for a request that does not send exactly that.
Status OneBytesInputError(const ModelDescription& d);
// OK when every name in `requested` is an output of `d` as the protocol sees it (a
// text-embedding model's "embedding", a generative model's "text_output"); else the error
// naming the first that is not. Tensor models' outputs are checked by the core.
Status CheckRequestedOutputs(const ModelDescription& d, const std::vector<std::string>& requested);
// A text-embedding result as the protocol's FP32 [rows, dimensions] tensor "embedding".
Tensor EmbeddingTensor(const EmbedResult& result);

}  // namespace tailcut
