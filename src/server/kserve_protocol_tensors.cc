#include "server/kserve_protocol_tensors.h"

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

}  // namespace tailcut
