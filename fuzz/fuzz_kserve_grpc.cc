// Fuzz target: the KServe v2 gRPC front-end's reading of a ModelInferRequest (what a client
// sends to ModelInfer or on a ModelStreamInfer stream), from the bytes gRPC would hand it:
// protobuf's parse, then GrpcRawInputs, and for every input both TensorFromGrpcInput and
// TextsFromGrpcInput (a tensor model's reading and a text model's).
//
// Oracles: no crash, overread or undefined behaviour on any input; a tensor that is read has
// exactly ElementCount(shape) * DataTypeSize(type) bytes (a smaller buffer would be read past
// by the engine), and, when it came typed, writing it back raw (AddGrpcOutput) and reading
// that gives the same bytes; every failure is InvalidArgument, with a message.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "fuzz/fuzz_check.h"
#include "server/grpc/kserve_grpc_tensors.h"

namespace {

using tailcut::fuzz::Check;

void CheckRefusal(const tailcut::Status& s) {
  Check(s.code() == tailcut::Status::Code::kInvalidArgument, "a refusal that is not InvalidArgument");
  Check(!s.message().empty(), "a refusal without a message");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  inference::ModelInferRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  auto raw = tailcut::GrpcRawInputs(request);
  if (!raw.ok()) {
    CheckRefusal(raw.status());
    return 0;
  }
  Check(raw->size() == static_cast<size_t>(request.inputs_size()), "raw inputs miscounted");
  for (int i = 0; i < request.inputs_size(); ++i) {
    const auto& input = request.inputs(i);
    const std::string* bytes = (*raw)[static_cast<size_t>(i)];
    auto tensor = tailcut::TensorFromGrpcInput(input, static_cast<size_t>(i), bytes);
    if (tensor.ok()) {
      auto count = tailcut::ElementCount(tensor->shape);
      Check(count.has_value(), "a tensor whose shape overflows");
      if (tensor->type == tailcut::DataType::kBytes) {
        Check(tensor->elements.size() == static_cast<uint64_t>(*count) && tensor->data.empty(),
              "a BYTES tensor whose elements disagree with its shape");
      } else {
        Check(tensor->data.size() ==
                  static_cast<uint64_t>(*count) * tailcut::DataTypeSize(tensor->type),
              "a tensor whose bytes disagree with its shape");
      }
      if (!bytes) {
        inference::ModelInferResponse response;
        if (tailcut::AddGrpcOutput(*tensor, &response).ok()) {
          auto again = tailcut::TensorFromGrpcInput(input, static_cast<size_t>(i),
                                                    &response.raw_output_contents(0));
          Check(again.ok() && again->data == tensor->data && again->elements == tensor->elements,
                "typed and raw reads differ");
        }
      }
    } else {
      CheckRefusal(tensor.status());
    }
    auto texts = tailcut::TextsFromGrpcInput(input, bytes);
    if (!texts.ok()) CheckRefusal(texts.status());
  }
  return 0;
}
