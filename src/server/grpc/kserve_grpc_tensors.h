// Conversions between KServe v2 gRPC tensors (grpc_service.proto) and tailcut's: a request's
// inputs to Tensors or texts, and Tensors to a response's outputs. A request gives each
// input's elements either typed (InferTensorContents) or as bytes (raw_input_contents, one
// entry per input: little-endian, row-major, BYTES elements length-prefixed), never both;
// tailcut always answers in raw_output_contents, as Triton does and clients expect.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "engine/tensor.h"
#include "server/grpc/grpc_service.pb.h"

namespace tailcut {

// For each input of `request`, its raw bytes (null where the request has none): checks that
// raw_input_contents has one entry per input when present, and that no input with raw bytes
// also has typed contents.
Result<std::vector<const std::string*>> GrpcRawInputs(const inference::ModelInferRequest& request);

// Input `index` of a request as a Tensor: datatype and shape checked against its elements,
// taken from `raw` when given, else from its typed contents (FP16 only comes raw: the
// protocol has no typed field for it).
Result<Tensor> TensorFromGrpcInput(const inference::ModelInferRequest::InferInputTensor& input,
                                   size_t index, const std::string* raw);

// The texts of a BYTES input (bytes_contents, or length-prefixed `raw`); its shape must count
// as many elements as there are texts.
Result<std::vector<std::string>> TextsFromGrpcInput(
    const inference::ModelInferRequest::InferInputTensor& input, const std::string* raw);

// Appends `t` to `response` as an output with its elements in raw_output_contents. A NaN or
// infinity is an Internal error (CheckFiniteOutput), and nothing is appended.
Status AddGrpcOutput(const Tensor& t, inference::ModelInferResponse* response);

}  // namespace tailcut
