// TextEmbeddingModel: a text-embedding model (or a reranker, whose one-element "embedding" is
// a pair's score) ready to serve: its tokenizer and its shared ONNX session, plus the batch
// runner that pads token sequences to the longest member, feeds input_ids / attention_mask /
// token_type_ids (whichever the model declares) from reused buffers, and pools per-token
// outputs when the graph does not.
//
// The embeddings EmbedBatch() returns are not normalised; NormalizeL2() does that on demand,
// so APIs that expose `normalize: false` (TEI) can be served from one model.
//
// Thread-safety: const methods are safe to call concurrently; each calling thread gets its
// own reusable input buffers (thread-local), so no locking happens on the inference path.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/model_config.h"
#include "engine/onnx_session.h"
#include "text/tokenizer.h"

namespace tailcut {

class TextEmbeddingModel {
 public:
  // Loads the tokenizer and the ONNX file named by `config` and checks that the model takes
  // input_ids and attention_mask and gives a float output of the right rank. Then warms up.
  static Result<std::unique_ptr<TextEmbeddingModel>> Load(const ModelConfig& config,
                                                          const OnnxSessionOptions& options);
  // Same, with the ONNX file replaced by `model_file` (a precision variant of the model).
  static Result<std::unique_ptr<TextEmbeddingModel>> Load(const ModelConfig& config,
                                                          const std::string& model_file,
                                                          const OnnxSessionOptions& options);

  const ModelConfig& config() const { return config_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const OnnxSession& session() const { return *session_; }
  int dimensions() const { return dimensions_; }

  // Embeds `sequences` (token ids as the tokenizer made them, each non-empty and at most
  // max_sequence_length long) as one padded batch. Writes sequences.size() * dimensions()
  // floats to `out`, row by row, not normalised.
  Status EmbedBatch(std::span<const std::span<const int64_t>> sequences, float* out) const;
  // Same, with each sequence's token type ids (Encoding::type_ids: a reranker's pairs), one
  // span per sequence of its length, or empty for all zeros. Ignored by a model without a
  // token_type_ids input.
  Status EmbedBatch(std::span<const std::span<const int64_t>> sequences,
                    std::span<const std::span<const int64_t>> type_ids, float* out) const;

  // Convenience for tools and tests: tokenise (truncating) and embed, normalised per config.
  Result<std::vector<std::vector<float>>> EmbedTexts(const std::vector<std::string>& texts) const;

  // Runs a few batches of typical shapes so that the first real request does not pay for
  // allocator growth and lazy kernel initialisation.
  Status Warmup() const;

 private:
  TextEmbeddingModel() = default;

  ModelConfig config_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<OnnxSession> session_;
  int dimensions_ = 0;
  bool has_token_type_ids_ = false;
  bool output_is_per_token_ = false;  // [batch, seq, dim] rather than [batch, dim].
  std::string output_name_;
};

// Scales `v` to unit L2 norm in place (a zero vector stays zero).
void NormalizeL2(std::span<float> v);

}  // namespace tailcut
