// ModelConfig: what a model folder in the model repository declares about itself, read from
// its model.yaml. A folder holding only model.onnx is a plain tensor model named after the
// folder, so any ONNX file dropped into the repository can be served over KServe v2.
//
//   name: all-MiniLM-L6-v2        # how clients address it (defaults to the folder name)
//   kind: text-embedding          # text-embedding | tensor
//   file: model.onnx              # relative to the folder
//   tokenizer: tokenizer.json     # text models: a Hugging Face tokenizer.json (WordPiece)
//   max_sequence_length: 256      # tokens, [CLS]/[SEP] included
//   output: sentence_embedding    # the output tensor that holds the embedding
//   pooling: none                 # none (graph pools) | mean | cls (for per-token outputs)
//   normalize: true               # L2-normalise unless the request says otherwise
//   dimensions: 384
//   max_batch_size: 64            # the largest batch this model is run with
//
// Thread-safety: plain value types.
#pragma once

#include <string>

#include "common/status.h"

namespace tailcut {

enum class ModelKind { kTextEmbedding, kTensor };
enum class Pooling { kNone, kMean, kCls };

struct ModelConfig {
  std::string name;
  std::string dir;  // Absolute folder of the model.
  ModelKind kind = ModelKind::kTensor;
  std::string file_path;       // Absolute path of the ONNX file.
  std::string tokenizer_path;  // Absolute path; text models only.
  int max_sequence_length = 256;
  std::string output;  // Empty = the model's first output.
  Pooling pooling = Pooling::kNone;
  bool normalize = true;
  int dimensions = 0;  // 0 = read from the model.
  int max_batch_size = 64;
};

// Reads <dir>/model.yaml (or infers a tensor model from <dir>/model.onnx). Errors name the
// file and the offending key.
Result<ModelConfig> LoadModelConfig(const std::string& dir);

std::string_view ModelKindName(ModelKind kind);

}  // namespace tailcut
