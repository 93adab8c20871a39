#include "engine/text_embedding_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "text/wordpiece_tokenizer.h"

namespace tailcut {
namespace {

// Buffers one inference thread reuses from batch to batch: after the first few batches no
// allocation happens on the hot path.
struct BatchBuffers {
  std::vector<int64_t> input_ids;
  std::vector<int64_t> attention_mask;
  std::vector<int64_t> token_type_ids;
  std::vector<float> output;
};

BatchBuffers& ThreadBuffers() {
  thread_local BatchBuffers buffers;
  return buffers;
}

}  // namespace

void NormalizeL2(std::span<float> v) {
  double sum = 0;
  for (float x : v) sum += static_cast<double>(x) * x;
  // Same floor as torch.nn.functional.normalize (eps 1e-12), so zero vectors stay zero.
  const float inv = static_cast<float>(1.0 / std::max(std::sqrt(sum), 1e-12));
  for (float& x : v) x *= inv;
}

Result<std::unique_ptr<TextEmbeddingModel>> TextEmbeddingModel::Load(
    const ModelConfig& config, const OnnxSessionOptions& options) {
  return Load(config, config.file_path, options);
}

Result<std::unique_ptr<TextEmbeddingModel>> TextEmbeddingModel::Load(
    const ModelConfig& config, const std::string& model_file, const OnnxSessionOptions& options) {
  if (!IsTextModel(config.kind)) {
    return Status::InvalidArgument("model '" + config.name +
                                   "' is neither a text-embedding model nor a reranker");
  }
  std::unique_ptr<TextEmbeddingModel> m(new TextEmbeddingModel());
  m->config_ = config;

  auto tokenizer =
      WordPieceTokenizer::FromTokenizerJson(config.tokenizer_path, config.max_sequence_length);
  if (!tokenizer.ok()) return tokenizer.status();
  m->tokenizer_ = std::move(tokenizer).value();

  auto session = OnnxSession::Load(model_file, options);
  if (!session.ok()) return session.status();
  m->session_ = std::move(session).value();
  const OnnxSession& s = *m->session_;

  for (const char* required : {"input_ids", "attention_mask"}) {
    const TensorSpec* spec = s.FindInput(required);
    if (!spec) {
      return Status::InvalidArgument("model '" + model_file + "' has no input named '" + required +
                                     "', which a text-embedding model needs");
    }
    if (spec->type != DataType::kInt64 || spec->shape.size() != 2) {
      return Status::InvalidArgument("model '" + model_file + "': input '" + required +
                                     "' must be INT64 [batch, sequence], is " +
                                     std::string(DataTypeName(spec->type)) + " " +
                                     ShapeToString(spec->shape));
    }
  }
  m->has_token_type_ids_ = s.FindInput("token_type_ids") != nullptr;
  if (config.kind == ModelKind::kReranker && !m->has_token_type_ids_) {
    // Without token types the model cannot tell the two texts of a pair apart.
    return Status::InvalidArgument("model '" + model_file +
                                   "' has no input 'token_type_ids', which a reranker needs");
  }
  for (const auto& spec : s.inputs()) {
    if (spec.name != "input_ids" && spec.name != "attention_mask" &&
        spec.name != "token_type_ids") {
      return Status::InvalidArgument("model '" + model_file + "' has input '" + spec.name +
                                     "', which a text-embedding model cannot be fed");
    }
  }

  m->output_name_ = config.output.empty() ? s.outputs().front().name : config.output;
  const TensorSpec* out = s.FindOutput(m->output_name_);
  if (!out) {
    return Status::InvalidArgument("model '" + model_file + "' has no output named '" +
                                   m->output_name_ + "'");
  }
  if (out->type != DataType::kFp32 || (out->shape.size() != 2 && out->shape.size() != 3)) {
    return Status::InvalidArgument("model '" + model_file + "': output '" + m->output_name_ +
                                   "' must be FP32 [batch, dim] or [batch, sequence, dim], is " +
                                   std::string(DataTypeName(out->type)) + " " +
                                   ShapeToString(out->shape));
  }
  m->output_is_per_token_ = out->shape.size() == 3;
  if (m->output_is_per_token_ && config.pooling == Pooling::kNone) {
    return Status::InvalidArgument("model '" + model_file + "': output '" + m->output_name_ +
                                   "' is per token, so model.yaml must set pooling: mean or cls");
  }
  const int64_t declared_dim = out->shape.back();
  if (declared_dim > 0) {
    if (config.dimensions > 0 && config.dimensions != declared_dim) {
      return Status::InvalidArgument(
          "model '" + model_file + "' gives " + std::to_string(declared_dim) +
          " dimensions, model.yaml says " + std::to_string(config.dimensions));
    }
    m->dimensions_ = static_cast<int>(declared_dim);
  } else {
    m->dimensions_ = config.dimensions;
  }
  if (m->dimensions_ <= 0) {
    return Status::InvalidArgument(
        "model '" + model_file + "' leaves the embedding size open; set dimensions in model.yaml");
  }

  Status warm = m->Warmup();
  if (!warm.ok()) return warm;
  return m;
}

Status TextEmbeddingModel::EmbedBatch(std::span<const std::span<const int64_t>> sequences,
                                      float* out) const {
  return EmbedBatch(sequences, {}, out);
}

Status TextEmbeddingModel::EmbedBatch(std::span<const std::span<const int64_t>> sequences,
                                      std::span<const std::span<const int64_t>> type_ids,
                                      float* out) const {
  const size_t batch = sequences.size();
  if (batch == 0) return Status::Ok();
  if (!type_ids.empty() && type_ids.size() != batch) {
    return Status::InvalidArgument("token type ids for " + std::to_string(type_ids.size()) +
                                   " of " + std::to_string(batch) + " sequences");
  }
  size_t seq_len = 0;
  for (size_t i = 0; i < batch; ++i) {
    const auto& s = sequences[i];
    if (s.empty()) return Status::InvalidArgument("empty token sequence");
    if (!type_ids.empty() && !type_ids[i].empty() && type_ids[i].size() != s.size()) {
      return Status::InvalidArgument("token type ids and token ids differ in length");
    }
    seq_len = std::max(seq_len, s.size());
  }
  if (seq_len > static_cast<size_t>(config_.max_sequence_length)) {
    return Status::InvalidArgument("token sequence longer than the model's maximum");
  }

  BatchBuffers& buf = ThreadBuffers();
  const size_t cells = batch * seq_len;
  buf.input_ids.assign(cells, tokenizer_->pad_id());
  buf.attention_mask.assign(cells, 0);
  if (has_token_type_ids_) buf.token_type_ids.assign(cells, 0);
  for (size_t i = 0; i < batch; ++i) {
    std::copy(sequences[i].begin(), sequences[i].end(), buf.input_ids.begin() + i * seq_len);
    std::fill_n(buf.attention_mask.begin() + i * seq_len, sequences[i].size(), 1);
    if (has_token_type_ids_ && !type_ids.empty()) {
      std::copy(type_ids[i].begin(), type_ids[i].end(), buf.token_type_ids.begin() + i * seq_len);
    }
  }

  // Everything that touches Ort objects is inside the try: the C++ API reports failures
  // (allocation, a shape it refuses) by throwing Ort::Exception, which must become a Status.
  try {
    const int64_t shape[2] = {static_cast<int64_t>(batch), static_cast<int64_t>(seq_len)};
    auto memory = Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault);
    Ort::Value inputs[3] = {
        Ort::Value::CreateTensor<int64_t>(memory, buf.input_ids.data(), cells, shape, 2),
        Ort::Value::CreateTensor<int64_t>(memory, buf.attention_mask.data(), cells, shape, 2),
        Ort::Value(nullptr)};
    const char* input_names[3] = {"input_ids", "attention_mask", "token_type_ids"};
    size_t input_count = 2;
    if (has_token_type_ids_) {
      inputs[2] =
          Ort::Value::CreateTensor<int64_t>(memory, buf.token_type_ids.data(), cells, shape, 2);
      input_count = 3;
    }
    const char* output_names[1] = {output_name_.c_str()};
    const size_t dim = static_cast<size_t>(dimensions_);

    if (!output_is_per_token_) {
      // The graph pools: let it write straight into the caller's rows. ONNX Runtime refuses
      // (an error, not a write past the end) when the graph's output has another shape.
      const int64_t out_shape[2] = {static_cast<int64_t>(batch), static_cast<int64_t>(dim)};
      Ort::Value output = Ort::Value::CreateTensor<float>(memory, out, batch * dim, out_shape, 2);
      return session_->RunRaw(input_names, inputs, input_count, output_names, &output, 1);
    }

    Ort::Value output(nullptr);
    Status run = session_->RunRaw(input_names, inputs, input_count, output_names, &output, 1);
    if (!run.ok()) return run;
    // The pooling below reads batch x sequence x dimensions floats: a graph whose hidden size
    // is left open and differs from model.yaml's dimensions would be read out of bounds.
    const std::vector<int64_t> got = output.GetTensorTypeAndShapeInfo().GetShape();
    const std::vector<int64_t> want = {static_cast<int64_t>(batch), static_cast<int64_t>(seq_len),
                                       static_cast<int64_t>(dim)};
    if (got != want) {
      return Status::Internal("model '" + config_.name + "': output '" + output_name_ +
                              "' has shape " + ShapeToString(got) +
                              ", expected [batch, sequence, dimensions] " + ShapeToString(want) +
                              "; does model.yaml's dimensions match the model's hidden size?");
    }
    const float* hidden = output.GetTensorData<float>();
    for (size_t i = 0; i < batch; ++i) {
      float* row = out + i * dim;
      const float* base = hidden + i * seq_len * dim;
      if (config_.pooling == Pooling::kCls) {
        std::memcpy(row, base, dim * sizeof(float));
        continue;
      }
      std::fill_n(row, dim, 0.0f);
      const size_t n = sequences[i].size();
      for (size_t t = 0; t < n; ++t) {
        for (size_t d = 0; d < dim; ++d) row[d] += base[t * dim + d];
      }
      for (size_t d = 0; d < dim; ++d) row[d] /= static_cast<float>(n);
    }
  } catch (const Ort::Exception& e) {
    return Status::Internal("model '" + config_.name + "': " + e.what());
  }
  return Status::Ok();
}

Result<std::vector<std::vector<float>>> TextEmbeddingModel::EmbedTexts(
    const std::vector<std::string>& texts) const {
  std::vector<std::vector<int64_t>> ids;
  ids.reserve(texts.size());
  for (const auto& text : texts) {
    auto enc = tokenizer_->Encode(text, EncodeOptions{});
    if (!enc.ok()) return enc.status();
    ids.push_back(std::move(enc->ids));
  }
  std::vector<std::span<const int64_t>> spans(ids.begin(), ids.end());
  std::vector<float> flat(texts.size() * static_cast<size_t>(dimensions_));
  Status s = EmbedBatch(spans, flat.data());
  if (!s.ok()) return s;
  std::vector<std::vector<float>> out;
  for (size_t i = 0; i < texts.size(); ++i) {
    std::vector<float> row(flat.begin() + i * dimensions_, flat.begin() + (i + 1) * dimensions_);
    if (config_.normalize) NormalizeL2(row);
    out.push_back(std::move(row));
  }
  return out;
}

Status TextEmbeddingModel::Warmup() const {
  // Shapes around what serving sees: single short queries, and full batches of short and
  // medium texts, so the arena has grown and every kernel has run once.
  const int max_batch = config_.max_batch_size > 0 ? config_.max_batch_size : 32;
  const int max_len = config_.max_sequence_length;
  const std::pair<int, int> shapes[] = {
      {1, 8}, {4, 16}, {std::min(max_batch, 32), 32}, {2, std::min(max_len, 128)}};
  std::vector<float> out;
  for (const auto& [batch, shape_len] : shapes) {
    // Never longer than serving can see: a model.yaml may declare a max_sequence_length
    // below these lengths (and a longer sequence would fail the whole load).
    const int len = std::min(shape_len, max_len);
    // Any ordinary in-vocabulary id (past the special tokens at the start of BERT vocabularies).
    const int64_t id = std::min<int64_t>(1000, static_cast<int64_t>(tokenizer_->vocab_size()) - 1);
    std::vector<int64_t> ids(static_cast<size_t>(len), id);
    std::vector<std::span<const int64_t>> seqs(static_cast<size_t>(batch), ids);
    out.resize(static_cast<size_t>(batch) * dimensions_);
    Status s = EmbedBatch(seqs, out.data());
    if (!s.ok()) return Status(s.code(), "warm-up failed: " + s.message());
  }
  return Status::Ok();
}

}  // namespace tailcut
