#include "engine/onnx_session.h"

#include <xxhash.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "engine/ort_environment.h"

namespace tailcut {
namespace {

GraphOptimizationLevel ToOrtLevel(int level) {
  if (level <= 0) return GraphOptimizationLevel::ORT_DISABLE_ALL;
  if (level == 1) return GraphOptimizationLevel::ORT_ENABLE_BASIC;
  if (level == 2) return GraphOptimizationLevel::ORT_ENABLE_EXTENDED;
  return GraphOptimizationLevel::ORT_ENABLE_ALL;
}

Result<TensorSpec> DescribeValue(const std::string& name, const Ort::TypeInfo& info,
                                 const std::string& path) {
  if (info.GetONNXType() != ONNX_TYPE_TENSOR) {
    return Status::InvalidArgument("model '" + path + "': '" + name +
                                   "' is not a tensor (sequences and maps are not served)");
  }
  auto tensor_info = info.GetTensorTypeAndShapeInfo();
  auto type = FromOnnxElementType(tensor_info.GetElementType());
  if (!type) {
    return Status::InvalidArgument("model '" + path + "': tensor '" + name +
                                   "' has an element type tailcut does not serve (ONNX type " +
                                   std::to_string(tensor_info.GetElementType()) + ")");
  }
  return TensorSpec{name, *type, tensor_info.GetShape()};
}

}  // namespace

std::optional<DataType> FromOnnxElementType(ONNXTensorElementDataType type) {
  switch (type) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL:
      return DataType::kBool;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8:
      return DataType::kUint8;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8:
      return DataType::kInt8;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16:
      return DataType::kInt16;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32:
      return DataType::kInt32;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64:
      return DataType::kInt64;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16:
      return DataType::kFp16;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT:
      return DataType::kFp32;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE:
      return DataType::kFp64;
    default:
      return std::nullopt;
  }
}

ONNXTensorElementDataType ToOnnxElementType(DataType type) {
  switch (type) {
    case DataType::kBool:
      return ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL;
    case DataType::kUint8:
      return ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8;
    case DataType::kInt8:
      return ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8;
    case DataType::kInt16:
      return ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16;
    case DataType::kInt32:
      return ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32;
    case DataType::kInt64:
      return ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64;
    case DataType::kFp16:
      return ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16;
    case DataType::kFp32:
      return ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
    case DataType::kFp64:
      return ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE;
    case DataType::kBytes:
      break;  // Never run: ValidateInputs refuses it (no model here takes ONNX strings).
  }
  return ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
}

Result<std::string> DigestFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Status::NotFound("cannot open '" + path + "': " + std::strerror(errno));
  }
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  std::vector<char> buffer(1 << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    XXH3_64bits_update(state, buffer.data(), static_cast<size_t>(in.gcount()));
  }
  const bool failed = in.bad();
  const XXH64_hash_t hash = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  if (failed) return Status::Internal("error reading '" + path + "'");
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(hash));
  return std::string(hex);
}

Result<std::unique_ptr<OnnxSession>> OnnxSession::Load(const std::string& path,
                                                       const OnnxSessionOptions& options) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return Status::NotFound("model file '" + path + "' does not exist");
  }
  if (!std::filesystem::is_regular_file(path, ec)) {
    return Status::InvalidArgument("model file '" + path + "' is not a regular file");
  }
  auto digest = DigestFile(path);
  if (!digest.ok()) return digest.status();
  // Models over 2 GB keep their weights beside the graph (ONNX external data, conventionally
  // "<file>.data" or "<file>_data"): new weights there are a new version too.
  for (const std::string& external : {path + ".data", path + "_data"}) {
    if (!std::filesystem::exists(external, ec)) continue;
    auto extra = DigestFile(external);
    if (!extra.ok()) return extra.status();
    *digest += "+" + *extra;
  }

  std::unique_ptr<OnnxSession> s(new OnnxSession());
  s->path_ = path;
  s->file_digest_ = *digest;
  try {
    Ort::SessionOptions so;
    so.DisablePerSessionThreads();  // Use the environment's shared pools.
    so.SetGraphOptimizationLevel(ToOrtLevel(options.graph_optimization_level));
    if (!options.optimized_model_path.empty()) {
      so.SetOptimizedModelFilePath(options.optimized_model_path.c_str());
    }
    if (options.enable_memory_pattern) {
      so.EnableMemPattern();
    } else {
      so.DisableMemPattern();
    }
    if (options.enable_cpu_arena) {
      so.EnableCpuMemArena();
    } else {
      so.DisableCpuMemArena();
    }
    s->session_ = std::make_unique<Ort::Session>(OrtEnvironment::Get().env(), path.c_str(), so);
  } catch (const Ort::Exception& e) {
    return Status::InvalidArgument("cannot load model '" + path + "': " + e.what());
  }

  Ort::AllocatorWithDefaultOptions allocator;
  for (size_t i = 0; i < s->session_->GetInputCount(); ++i) {
    std::string name = s->session_->GetInputNameAllocated(i, allocator).get();
    auto spec = DescribeValue(name, s->session_->GetInputTypeInfo(i), path);
    if (!spec.ok()) return spec.status();
    s->inputs_.push_back(std::move(spec).value());
  }
  for (size_t i = 0; i < s->session_->GetOutputCount(); ++i) {
    std::string name = s->session_->GetOutputNameAllocated(i, allocator).get();
    auto spec = DescribeValue(name, s->session_->GetOutputTypeInfo(i), path);
    if (!spec.ok()) return spec.status();
    s->outputs_.push_back(std::move(spec).value());
  }
  return s;
}

const TensorSpec* OnnxSession::FindInput(const std::string& name) const {
  for (const auto& spec : inputs_) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

const TensorSpec* OnnxSession::FindOutput(const std::string& name) const {
  for (const auto& spec : outputs_) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

Status OnnxSession::ValidateInputs(const std::vector<Tensor>& inputs) const {
  for (const auto& tensor : inputs) {
    const TensorSpec* spec = FindInput(tensor.name);
    if (!spec) {
      std::string names;
      for (const auto& in : inputs_) names += (names.empty() ? "" : ", ") + in.name;
      return Status::InvalidArgument("unknown input '" + tensor.name +
                                     "'; the model's inputs are: " + names);
    }
    if (tensor.type != spec->type) {
      return Status::InvalidArgument(
          "input '" + tensor.name + "' has datatype " + std::string(DataTypeName(tensor.type)) +
          ", the model expects " + std::string(DataTypeName(spec->type)));
    }
    if (tensor.shape.size() != spec->shape.size()) {
      return Status::InvalidArgument("input '" + tensor.name + "' has shape " +
                                     ShapeToString(tensor.shape) + ", the model expects rank " +
                                     std::to_string(spec->shape.size()) + " " +
                                     ShapeToString(spec->shape));
    }
    for (size_t d = 0; d < spec->shape.size(); ++d) {
      if (tensor.shape[d] < 0 || (spec->shape[d] >= 0 && tensor.shape[d] != spec->shape[d])) {
        return Status::InvalidArgument("input '" + tensor.name + "' has shape " +
                                       ShapeToString(tensor.shape) + ", the model expects " +
                                       ShapeToString(spec->shape));
      }
    }
    auto count = ElementCount(tensor.shape);
    if (!count || static_cast<size_t>(*count) * DataTypeSize(tensor.type) != tensor.data.size()) {
      return Status::InvalidArgument(
          "input '" + tensor.name + "' holds " + std::to_string(tensor.data.size()) +
          " bytes, which does not match its shape " + ShapeToString(tensor.shape));
    }
  }
  for (const auto& spec : inputs_) {
    bool given = false;
    for (const auto& tensor : inputs) {
      if (tensor.name == spec.name) {
        if (given) return Status::InvalidArgument("input '" + spec.name + "' given twice");
        given = true;
      }
    }
    if (!given) return Status::InvalidArgument("missing input '" + spec.name + "'");
  }
  return Status::Ok();
}

Result<std::vector<Tensor>> OnnxSession::Run(const std::vector<Tensor>& inputs,
                                             const std::vector<std::string>& output_names) const {
  Status valid = ValidateInputs(inputs);
  if (!valid.ok()) return valid;

  std::vector<std::string> wanted = output_names;
  if (wanted.empty()) {
    for (const auto& spec : outputs_) wanted.push_back(spec.name);
  }
  for (const auto& name : wanted) {
    if (!FindOutput(name)) return Status::InvalidArgument("unknown output '" + name + "'");
  }

  auto memory = Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault);
  std::vector<Ort::Value> values;
  std::vector<const char*> in_names;
  values.reserve(inputs.size());
  for (const auto& t : inputs) {
    // ONNX Runtime reads inputs only; the const_cast never leads to a write.
    values.push_back(Ort::Value::CreateTensor(memory, const_cast<std::byte*>(t.data.data()),
                                              t.data.size(), t.shape.data(), t.shape.size(),
                                              ToOnnxElementType(t.type)));
    in_names.push_back(t.name.c_str());
  }
  std::vector<const char*> out_names;
  for (const auto& name : wanted) out_names.push_back(name.c_str());
  std::vector<Ort::Value> out_values(wanted.size());
  for (auto& v : out_values) v = Ort::Value(nullptr);

  Status run = RunRaw(in_names.data(), values.data(), values.size(), out_names.data(),
                      out_values.data(), out_values.size());
  if (!run.ok()) return run;

  std::vector<Tensor> outputs;
  for (size_t i = 0; i < wanted.size(); ++i) {
    auto info = out_values[i].GetTensorTypeAndShapeInfo();
    auto type = FromOnnxElementType(info.GetElementType());
    if (!type) return Status::Internal("output '" + wanted[i] + "' has an unsupported type");
    Tensor t;
    t.name = wanted[i];
    t.type = *type;
    t.shape = info.GetShape();
    const size_t bytes = info.GetElementCount() * DataTypeSize(*type);
    t.data.resize(bytes);
    if (bytes) std::memcpy(t.data.data(), out_values[i].GetTensorRawData(), bytes);
    outputs.push_back(std::move(t));
  }
  return outputs;
}

Status OnnxSession::RunRaw(const char* const* input_names, const Ort::Value* inputs,
                           size_t input_count, const char* const* output_names, Ort::Value* outputs,
                           size_t output_count) const {
  try {
    session_->Run(Ort::RunOptions{nullptr}, input_names, inputs, input_count, output_names, outputs,
                  output_count);
  } catch (const Ort::Exception& e) {
    return Status::Internal(std::string("inference failed in '") + path_ + "': " + e.what());
  }
  return Status::Ok();
}

}  // namespace tailcut
