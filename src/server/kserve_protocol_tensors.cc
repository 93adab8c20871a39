#include "server/kserve_protocol_tensors.h"

#include <cstring>

namespace tailcut {

std::vector<ProtocolTensor> ProtocolTensorsFromSpecs(const std::vector<TensorSpec>& specs) {
  std::vector<ProtocolTensor> out;
  for (const auto& s : specs) out.push_back({s.name, std::string(DataTypeName(s.type)), s.shape});
  return out;
}

void ProtocolTensors(const ModelDescription& d, std::vector<ProtocolTensor>* inputs,
                     std::vector<ProtocolTensor>* outputs) {
  if (d.kind == "text-embedding") {
    inputs->push_back({"text", "BYTES", {-1}});
    outputs->push_back({"embedding", "FP32", {-1, d.dimensions}});
  } else if (d.kind == "generative") {
    inputs->push_back({"text_input", "BYTES", {1}});
    outputs->push_back({"text_output", "BYTES", {1}});
  } else {
    *inputs = ProtocolTensorsFromSpecs(d.inputs);
    *outputs = ProtocolTensorsFromSpecs(d.outputs);
  }
}

std::string_view ProtocolPlatform(const ModelDescription& d) {
  return d.kind == "generative" ? "llama_cpp_gguf" : "onnxruntime_onnx";
}

Status OneBytesInputError(const ModelDescription& d) {
  return Status::InvalidArgument(d.kind == "generative"
                                     ? "a generative model takes exactly one input: "
                                       "'text_input', a BYTES tensor of one prompt"
                                     : "a text-embedding model takes exactly one input: a BYTES "
                                       "tensor of texts");
}

Status CheckRequestedOutputs(const ModelDescription& d, const std::vector<std::string>& requested) {
  if (d.kind != "text-embedding" && d.kind != "generative") return Status::Ok();
  const std::string_view only = d.kind == "generative" ? "text_output" : "embedding";
  for (const auto& name : requested) {
    if (name != only) {
      return Status::InvalidArgument("model '" + d.name + "' has no output '" + name + "'; a " +
                                     d.kind + " model's one output is '" + std::string(only) +
                                     "'");
    }
  }
  return Status::Ok();
}

Tensor EmbeddingTensor(const EmbedResult& r) {
  Tensor out;
  out.name = "embedding";
  out.type = DataType::kFp32;
  out.shape = {static_cast<int64_t>(r.token_counts.size()), r.dimensions};
  out.data.resize(r.embeddings.size() * sizeof(float));
  std::memcpy(out.data.data(), r.embeddings.data(), out.data.size());
  return out;
}

}  // namespace tailcut
