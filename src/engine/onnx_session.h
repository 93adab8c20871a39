// OnnxSession: one loaded ONNX model, shared by every caller (an ONNX Runtime session is
// safe to Run() concurrently). It describes the model's inputs and outputs, validates
// caller tensors against them and runs inference, either on generic Tensors (the KServe v2
// path, which copies) or on caller-owned Ort::Values (the text hot path, which does not).
//
// Thread-safety: all const methods are safe to call concurrently after Load() returns.
#pragma once

#include <onnxruntime_cxx_api.h>

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/tensor.h"

namespace tailcut {

struct OnnxSessionOptions {
  // Graph optimisations ONNX Runtime applies at load: 0 none, 1 basic, 2 extended, 99 all.
  // Higher levels fuse more operators; all of them keep results within float tolerance.
  int graph_optimization_level = 99;
  // When set, the optimised graph is written here (for inspection; loads faster next time).
  std::string optimized_model_path;
  // Memory pattern planning reuses allocation plans between runs of identical shapes; it
  // pays for fixed-shape models and costs little for dynamic ones.
  bool enable_memory_pattern = true;
  // The CPU arena allocator keeps freed blocks for reuse, which removes allocation jitter
  // between batches at the price of memory held at the high-water mark.
  bool enable_cpu_arena = true;
};

class OnnxSession {
 public:
  // Loads `path`. Errors name the file and the problem: missing, unreadable, not an ONNX
  // model, or unsupported by this runtime.
  static Result<std::unique_ptr<OnnxSession>> Load(const std::string& path,
                                                   const OnnxSessionOptions& options);

  const std::string& path() const { return path_; }
  // Hex xxh3-64 digest of the file's bytes: identifies this exact model version.
  const std::string& file_digest() const { return file_digest_; }
  const std::vector<TensorSpec>& inputs() const { return inputs_; }
  const std::vector<TensorSpec>& outputs() const { return outputs_; }
  const TensorSpec* FindInput(const std::string& name) const;
  const TensorSpec* FindOutput(const std::string& name) const;

  // Checks that `inputs` name every model input exactly once with the declared type and a
  // shape compatible with the declared one. The message names the first offending tensor.
  Status ValidateInputs(const std::vector<Tensor>& inputs) const;

  // Runs the model on generic tensors and returns the requested outputs (all when empty).
  Result<std::vector<Tensor>> Run(const std::vector<Tensor>& inputs,
                                  const std::vector<std::string>& output_names = {}) const;

  // Runs on caller-owned values without copies. `outputs` may hold pre-allocated tensors
  // (written in place) or empty values (allocated by the runtime).
  Status RunRaw(const char* const* input_names, const Ort::Value* inputs, size_t input_count,
                const char* const* output_names, Ort::Value* outputs, size_t output_count) const;

 private:
  OnnxSession() = default;

  std::string path_;
  std::string file_digest_;
  std::unique_ptr<Ort::Session> session_;
  std::vector<TensorSpec> inputs_;
  std::vector<TensorSpec> outputs_;
};

// Maps between ONNX element types and ours; nullopt for types tailcut does not serve.
std::optional<DataType> FromOnnxElementType(ONNXTensorElementDataType type);
ONNXTensorElementDataType ToOnnxElementType(DataType type);

// Hex xxh3-64 of a file's bytes, or an error naming the file.
Result<std::string> DigestFile(const std::string& path);

}  // namespace tailcut
