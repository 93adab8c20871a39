// GenerativeModel on llama.cpp: one llama_model, one llama_context (its KV cache in the layout
// GenerativeModelOptions asks for), one ggml thread pool, and a shadow of the cache's cell
// accounting.
//
// The shadow: llama.cpp's public API says where each sequence starts and ends but not how many
// cells are in use, which is what a scheduler budgets. In a unified cache (kShared) a cell
// holds one token for a set of sequences (CopyPrefix adds a sequence to cells, it copies
// nothing), and is free when that set is empty, so counting references per cell reproduces
// llama.cpp's own count exactly for attention models without a sliding window (SWA models
// prune cells on their own: the count is then an upper bound). With a stream per sequence
// (kPerSequence) no cell is shared, and the same count is the sum of the sequences' lengths.
// Recurrent and hybrid models keep a state per sequence, not cells, and are refused at load.
#include <ggml-cpu.h>
#include <llama.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>

#include "engine/chat_template.h"
#include "engine/generative_model.h"
#include "engine/llama_backend.h"

namespace tailcut {
namespace {

namespace fs = std::filesystem;

// Load and decode failures are reported only through llama.cpp's log: the Status quotes the
// last error line (llama_backend.h).
using llama_backend::ClearLastError;
using llama_backend::LastError;

struct ModelDeleter {
  void operator()(llama_model* m) const { llama_model_free(m); }
};
struct ContextDeleter {
  void operator()(llama_context* c) const { llama_free(c); }
};
struct ThreadpoolDeleter {
  void operator()(ggml_threadpool* t) const { ggml_threadpool_free(t); }
};

Status ValidateOptions(const GenerativeModelOptions& o) {
  auto out_of_range = [](const char* name, int64_t value, int64_t lo, int64_t hi) {
    return Status::InvalidArgument(std::string("GenerativeModelOptions.") + name + " is " +
                                   std::to_string(value) + "; it must be in " +
                                   std::to_string(lo) + " .. " + std::to_string(hi));
  };
  constexpr int32_t kMaxThreads = GGML_MAX_N_THREADS;
  if (o.context_tokens < 0) return out_of_range("context_tokens", o.context_tokens, 0, INT32_MAX);
  if (o.max_sequences < 1 || o.max_sequences > 256) {  // LLAMA_MAX_SEQ (not in llama.h).
    return out_of_range("max_sequences", o.max_sequences, 1, 256);
  }
  if (o.batch_tokens < 1) return out_of_range("batch_tokens", o.batch_tokens, 1, INT32_MAX);
  if (o.decode_threads < 1 || o.decode_threads > kMaxThreads) {
    return out_of_range("decode_threads", o.decode_threads, 1, kMaxThreads);
  }
  if (o.batch_threads < 1 || o.batch_threads > kMaxThreads) {
    return out_of_range("batch_threads", o.batch_threads, 1, kMaxThreads);
  }
  if (o.thread_poll_level < 0 || o.thread_poll_level > 100) {
    return out_of_range("thread_poll_level", o.thread_poll_level, 0, 100);
  }
  return Status::Ok();
}

// Checks the file before llama.cpp sees it, so the common mistakes get a precise message
// rather than a parser's.
Status CheckGgufFile(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    return Status::NotFound("generative model file '" + path + "' not found");
  }
  if (!fs::is_regular_file(path, ec)) {
    return Status::InvalidArgument("generative model '" + path + "' is not a file");
  }
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  if (!in.read(magic, sizeof magic)) {
    return Status::InvalidArgument("'" + path + "' is not a GGUF file: shorter than its header");
  }
  if (std::memcmp(magic, "GGUF", 4) != 0) {
    return Status::InvalidArgument("'" + path +
                                   "' is not a GGUF file: it does not start with \"GGUF\"");
  }
  return Status::Ok();
}

class LlamaGenerativeModel final : public GenerativeModel {
 public:
  LlamaGenerativeModel(std::string path, llama_model* model)
      : path_(std::move(path)), model_(model), vocab_(llama_model_get_vocab(model)) {}

  ~LlamaGenerativeModel() override {
    if (batch_.token != nullptr) llama_batch_free(batch_);
    context_.reset();  // Before the thread pool it uses.
  }

  Status Init(const GenerativeModelOptions& options) {
    n_vocab_ = llama_vocab_n_tokens(vocab_);
    n_ctx_train_ = llama_model_n_ctx_train(model_.get());
    char desc[256] = {};
    llama_model_desc(model_.get(), desc, sizeof desc);
    description_ = desc;
    chat_template_ =
        std::make_unique<LlamaChatTemplate>(model_.get(), path_, options.chat_template);

    if (llama_model_is_recurrent(model_.get()) || llama_model_is_hybrid(model_.get()) ||
        llama_model_has_encoder(model_.get())) {
      return Status::InvalidArgument(
          "'" + path_ + "' (" + description_ +
          ") is not a plain decoder (recurrent, hybrid or encoder-decoder); tailcut's "
          "generative engine needs a per-token KV cache");
    }
    layout_ = options.kv_cache_layout;
    const bool per_sequence = layout_ == KvCacheLayout::kPerSequence;
    const int32_t streams = per_sequence ? options.max_sequences : 1;
    const int32_t ctx = options.context_tokens == 0
                            ? static_cast<int32_t>(std::min<int64_t>(
                                  int64_t{n_ctx_train_} * streams, INT32_MAX))
                            : options.context_tokens;
    if (n_ctx_train_ > 0 && ctx / streams > n_ctx_train_) {
      return Status::InvalidArgument(
          "GenerativeModelOptions.context_tokens is " + std::to_string(ctx) +
          (per_sequence ? " (" + std::to_string(ctx / streams) + " for each of " +
                              std::to_string(streams) + " sequences)"
                        : std::string()) +
          ", beyond the trained context of " + std::to_string(n_ctx_train_) + " tokens of '" +
          path_ + "'");
    }
    if (options.batch_tokens > ctx) {
      return Status::InvalidArgument("GenerativeModelOptions.batch_tokens is " +
                                     std::to_string(options.batch_tokens) +
                                     ", more than context_tokens " + std::to_string(ctx));
    }

    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = static_cast<uint32_t>(ctx);
    cp.n_batch = static_cast<uint32_t>(options.batch_tokens);
    cp.n_ubatch = static_cast<uint32_t>(options.batch_tokens);
    cp.n_seq_max = static_cast<uint32_t>(options.max_sequences);
    cp.n_threads = options.decode_threads;
    cp.n_threads_batch = options.batch_threads;
    cp.kv_unified = !per_sequence;  // See KvCacheLayout.
    cp.no_perf = true;
    ClearLastError();
    context_.reset(llama_init_from_model(model_.get(), cp));
    if (!context_) {
      return Status::ResourceExhausted("could not create a context of " + std::to_string(ctx) +
                                       " tokens for '" + path_ + "': " + LastError());
    }
    // One pool, sized for the larger of the two thread counts, serves both kinds of step
    // (ggml runs a graph on as many of its threads as the step asks for). Without it ggml
    // would start and join fresh threads on every step.
    ggml_threadpool_params tpp =
        ggml_threadpool_params_default(std::max(options.decode_threads, options.batch_threads));
    tpp.poll = static_cast<uint32_t>(options.thread_poll_level);
    threadpool_.reset(ggml_threadpool_new(&tpp));
    if (!threadpool_) return Status::Internal("could not start the ggml thread pool");
    llama_attach_threadpool(context_.get(), threadpool_.get(), threadpool_.get());

    // Both padded up by llama.cpp (a stream to a multiple of 256 cells).
    n_ctx_ = static_cast<int32_t>(llama_n_ctx(context_.get()));
    n_ctx_seq_ = static_cast<int32_t>(llama_n_ctx_seq(context_.get()));
    n_seq_max_ = options.max_sequences;
    n_batch_ = options.batch_tokens;
    memory_ = llama_get_memory(context_.get());
    batch_ = llama_batch_init(n_batch_, 0, 1);
    sequences_.assign(static_cast<size_t>(n_seq_max_), {});
    next_position_.assign(static_cast<size_t>(n_seq_max_), -1);
    rows_.reserve(static_cast<size_t>(n_batch_));
    row_entries_.reserve(static_cast<size_t>(n_batch_));
    return Status::Ok();
  }

  const std::string& path() const override { return path_; }
  const std::string& description() const override { return description_; }
  int32_t vocab_size() const override { return n_vocab_; }
  int32_t trained_context_tokens() const override { return n_ctx_train_; }
  int32_t context_tokens() const override { return n_ctx_; }
  int32_t sequence_context_tokens() const override { return n_ctx_seq_; }
  KvCacheLayout kv_cache_layout() const override { return layout_; }
  int32_t max_sequences() const override { return n_seq_max_; }
  int32_t batch_tokens() const override { return n_batch_; }

  Result<std::vector<TokenId>> Tokenize(std::string_view text, bool add_special,
                                        bool parse_special) const override {
    if (text.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max() / 2)) {
      return Status::PayloadTooLarge("text of " + std::to_string(text.size()) +
                                     " bytes is too long to tokenise");
    }
    const auto len = static_cast<int32_t>(text.size());
    std::vector<TokenId> tokens(static_cast<size_t>(len) + 4);  // BPE: at most a token a byte.
    int32_t n = llama_tokenize(vocab_, text.data(), len, tokens.data(),
                               static_cast<int32_t>(tokens.size()), add_special, parse_special);
    if (n < 0 && n != std::numeric_limits<int32_t>::min()) {
      tokens.resize(static_cast<size_t>(-n));
      n = llama_tokenize(vocab_, text.data(), len, tokens.data(),
                         static_cast<int32_t>(tokens.size()), add_special, parse_special);
    }
    if (n < 0) return Status::InvalidArgument("llama.cpp could not tokenise the text");
    tokens.resize(static_cast<size_t>(n));
    return tokens;
  }

  std::string TokenToPiece(TokenId token, bool render_special) const override {
    if (token < 0 || token >= n_vocab_) return {};
    char buf[64];
    int32_t n = llama_token_to_piece(vocab_, token, buf, sizeof buf, 0, render_special);
    if (n >= 0) return std::string(buf, static_cast<size_t>(n));
    std::string piece(static_cast<size_t>(-n), '\0');
    n = llama_token_to_piece(vocab_, token, piece.data(), -n, 0, render_special);
    piece.resize(static_cast<size_t>(std::max(n, 0)));
    return piece;
  }

  Result<std::string> Detokenize(std::span<const TokenId> tokens,
                                 bool render_special) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (tokens[i] < 0 || tokens[i] >= n_vocab_) return TokenOutOfRange(tokens[i], i);
    }
    const auto count = static_cast<int32_t>(tokens.size());
    std::string text(tokens.size() * 8 + 16, '\0');
    int32_t n = llama_detokenize(vocab_, tokens.data(), count, text.data(),
                                 static_cast<int32_t>(text.size()), false, render_special);
    if (n < 0) {
      text.resize(static_cast<size_t>(-n));
      n = llama_detokenize(vocab_, tokens.data(), count, text.data(),
                           static_cast<int32_t>(text.size()), false, render_special);
    }
    if (n < 0) return Status::Internal("llama.cpp could not detokenise the tokens");
    text.resize(static_cast<size_t>(n));
    return text;
  }

  Result<std::string> ApplyChatTemplate(std::span<const ChatMessage> messages,
                                        bool add_generation_prompt) const override {
    return chat_template_->Render(messages, add_generation_prompt);
  }

  TokenId bos_token() const override { return llama_vocab_bos(vocab_); }
  TokenId eos_token() const override { return llama_vocab_eos(vocab_); }
  TokenId eot_token() const override { return llama_vocab_eot(vocab_); }
  bool IsEndOfGeneration(TokenId token) const override {
    return token >= 0 && token < n_vocab_ && llama_vocab_is_eog(vocab_, token);
  }

  Result<DecodeLogits> Decode(const DecodeBatch& batch) override {
    if (Status s = CheckBatch(batch); !s.ok()) return s;
    const auto n = static_cast<int32_t>(batch.size());
    // With a stream per sequence, llama.cpp cuts a batch into micro-batches of sequences with
    // consecutive, increasing ids (llama_batch_allocr::split_equal, sequential), and computes
    // the model's graph once per micro-batch. Entries in the caller's order (a scheduler's
    // admission order: ids 7, 6, 5, ...) made a step of 8 one-token sequences 8 graph runs:
    // 60 ms instead of 42. So entries go to llama.cpp ordered by sequence (stable: each
    // sequence's tokens keep their order), and the logits come back in entry order.
    order_.resize(static_cast<size_t>(n));
    std::iota(order_.begin(), order_.end(), 0);
    if (layout_ == KvCacheLayout::kPerSequence) {
      std::stable_sort(order_.begin(), order_.end(), [&](int32_t a, int32_t b) {
        return batch.entries[static_cast<size_t>(a)].sequence <
               batch.entries[static_cast<size_t>(b)].sequence;
      });
    }
    slot_.resize(static_cast<size_t>(n));
    batch_.n_tokens = n;
    for (int32_t j = 0; j < n; ++j) {
      const int32_t i = order_[static_cast<size_t>(j)];
      const DecodeEntry& e = batch.entries[static_cast<size_t>(i)];
      slot_[static_cast<size_t>(i)] = j;
      batch_.token[j] = e.token;
      batch_.pos[j] = e.position;
      batch_.n_seq_id[j] = 1;
      batch_.seq_id[j][0] = e.sequence;
      batch_.logits[j] = e.logits ? 1 : 0;
    }
    ClearLastError();
    const int32_t rc = llama_decode(context_.get(), batch_);
    // On success every entry is cached; on a fatal error llama.cpp keeps the micro-batches it
    // finished. Either way the cache now ends where llama.cpp says each sequence ends.
    for (const DecodeEntry& e : batch.entries) SyncSequence(e.sequence);
    switch (rc) {
      case 0:
        break;
      case 1:
        return Status::ResourceExhausted("llama.cpp found no room for " + std::to_string(n) +
                                         " tokens in the KV cache (" + UsageText() + ")");
      case -1:
        return Status::InvalidArgument("llama.cpp refused the batch: " + LastError());
      default:
        return Status::Internal("llama_decode failed with " + std::to_string(rc) + ": " +
                                LastError());
    }
    rows_.clear();
    row_entries_.clear();
    for (int32_t i = 0; i < n; ++i) {
      if (!batch.entries[static_cast<size_t>(i)].logits) continue;
      const float* row = llama_get_logits_ith(context_.get(), slot_[static_cast<size_t>(i)]);
      if (row == nullptr) return Status::Internal("llama.cpp gave no logits for entry " +
                                                  std::to_string(i));
      rows_.push_back(row);
      row_entries_.push_back(i);
    }
    return DecodeLogits(rows_, row_entries_, n_vocab_);
  }

  TokenPosition SequenceLength(SequenceId sequence) const override {
    if (!ValidSequence(sequence)) return 0;
    return Length(sequences_[static_cast<size_t>(sequence)]);
  }

  Status RemoveSequence(SequenceId sequence) override {
    if (!ValidSequence(sequence)) return SequenceOutOfRange(sequence);
    llama_memory_seq_rm(memory_, sequence, -1, -1);  // Removing a whole sequence never fails.
    ShadowSequence& s = sequences_[static_cast<size_t>(sequence)];
    for (int32_t cell : s.cells) Release(cell);
    s = {};
    return Status::Ok();
  }

  Status RemoveTokens(SequenceId sequence, TokenPosition begin, TokenPosition end) override {
    if (!ValidSequence(sequence)) return SequenceOutOfRange(sequence);
    ShadowSequence& s = sequences_[static_cast<size_t>(sequence)];
    const TokenPosition length = Length(s);
    if (end < 0 || end > length) end = length;
    begin = std::max(begin, s.first);
    if (begin >= end) return Status::Ok();  // Nothing cached there.
    if (begin == s.first && end == length) return RemoveSequence(sequence);
    if (begin != s.first && end != length) {
      return Status::InvalidArgument(
          "removing positions [" + std::to_string(begin) + ", " + std::to_string(end) +
          ") of sequence " + std::to_string(sequence) + " (cached [" + std::to_string(s.first) +
          ", " + std::to_string(length) + ")) would leave a gap; remove a prefix or a suffix");
    }
    if (!llama_memory_seq_rm(memory_, sequence, begin, end)) {
      return Status::Internal("llama.cpp could not remove positions [" + std::to_string(begin) +
                              ", " + std::to_string(end) + ") of sequence " +
                              std::to_string(sequence));
    }
    const auto from = static_cast<size_t>(begin - s.first);
    const auto to = static_cast<size_t>(end - s.first);
    for (size_t i = from; i < to; ++i) Release(s.cells[i]);
    s.cells.erase(s.cells.begin() + static_cast<std::ptrdiff_t>(from),
                  s.cells.begin() + static_cast<std::ptrdiff_t>(to));
    if (begin == s.first) s.first = end;
    return Status::Ok();
  }

  Status CopyPrefix(SequenceId source, SequenceId destination, TokenPosition length) override {
    if (!ValidSequence(source)) return SequenceOutOfRange(source);
    if (!ValidSequence(destination)) return SequenceOutOfRange(destination);
    if (source == destination) {
      return Status::InvalidArgument("CopyPrefix from sequence " + std::to_string(source) +
                                     " to itself");
    }
    ShadowSequence& src = sequences_[static_cast<size_t>(source)];
    ShadowSequence& dst = sequences_[static_cast<size_t>(destination)];
    if (!dst.cells.empty()) {
      return Status::FailedPrecondition("CopyPrefix into sequence " +
                                        std::to_string(destination) + ", which holds " +
                                        std::to_string(dst.cells.size()) + " tokens");
    }
    if (length <= 0 || src.first != 0 || length > Length(src)) {
      return Status::InvalidArgument(
          "CopyPrefix of " + std::to_string(length) + " tokens from sequence " +
          std::to_string(source) + ", which caches positions [" + std::to_string(src.first) +
          ", " + std::to_string(Length(src)) + ")");
    }
    dst.first = 0;
    if (layout_ == KvCacheLayout::kShared) {
      llama_memory_seq_cp(memory_, source, destination, 0, length);
      dst.cells.assign(src.cells.begin(), src.cells.begin() + length);
      for (int32_t cell : dst.cells) ++cell_refs_[static_cast<size_t>(cell)];
      return Status::Ok();
    }
    // Between streams llama.cpp copies a whole stream (the data at the next decode), so the
    // destination gets all of the source and drops what follows the prefix.
    llama_memory_seq_cp(memory_, source, destination, -1, -1);
    if (length < Length(src) && !llama_memory_seq_rm(memory_, destination, length, -1)) {
      llama_memory_seq_rm(memory_, destination, -1, -1);
      return Status::Internal("llama.cpp could not trim the copy of sequence " +
                              std::to_string(source) + " to " + std::to_string(length) +
                              " tokens");
    }
    for (TokenPosition i = 0; i < length; ++i) dst.cells.push_back(Acquire());
    return Status::Ok();
  }

  void ClearCache() override {
    llama_memory_clear(memory_, /*data=*/false);
    for (ShadowSequence& s : sequences_) s = {};
    cell_refs_.clear();
    free_cells_.clear();
    used_cells_ = 0;
    rows_.clear();
    row_entries_.clear();
  }

  KvCacheUsage CacheUsage() const override { return {used_cells_, n_ctx_}; }

 private:
  // A sequence's cached positions [first, first + cells.size()) and the shadow cell of each.
  struct ShadowSequence {
    TokenPosition first = 0;
    std::vector<int32_t> cells;
  };

  static TokenPosition Length(const ShadowSequence& s) {
    return s.cells.empty() ? 0 : s.first + static_cast<TokenPosition>(s.cells.size());
  }
  bool ValidSequence(SequenceId s) const { return s >= 0 && s < n_seq_max_; }
  Status SequenceOutOfRange(SequenceId s) const {
    return Status::InvalidArgument("sequence " + std::to_string(s) + " is out of range 0 .. " +
                                   std::to_string(n_seq_max_ - 1) + " (max_sequences " +
                                   std::to_string(n_seq_max_) + ")");
  }
  Status TokenOutOfRange(TokenId token, size_t index) const {
    return Status::InvalidArgument("token " + std::to_string(token) + " at index " +
                                   std::to_string(index) + " is outside the vocabulary of " +
                                   std::to_string(n_vocab_));
  }
  std::string UsageText() const {
    return std::to_string(used_cells_) + " of " + std::to_string(n_ctx_) + " cells in use";
  }

  Status CheckBatch(const DecodeBatch& batch) {
    if (batch.empty()) return Status::InvalidArgument("empty decode batch");
    if (batch.size() > static_cast<size_t>(n_batch_)) {
      return Status::InvalidArgument("decode batch of " + std::to_string(batch.size()) +
                                     " tokens exceeds batch_tokens " + std::to_string(n_batch_));
    }
    std::fill(next_position_.begin(), next_position_.end(), -1);
    auto where = [](size_t i) { return "decode entry " + std::to_string(i) + ": "; };
    for (size_t i = 0; i < batch.size(); ++i) {
      const DecodeEntry& e = batch.entries[i];
      if (!ValidSequence(e.sequence)) {
        return Status::InvalidArgument(where(i) + SequenceOutOfRange(e.sequence).message());
      }
      if (e.token < 0 || e.token >= n_vocab_) return TokenOutOfRange(e.token, i);
      TokenPosition& next = next_position_[static_cast<size_t>(e.sequence)];
      if (next < 0) next = SequenceLength(e.sequence);
      if (e.position >= n_ctx_seq_) {
        return Status::InvalidArgument(
            where(i) + "position " + std::to_string(e.position) + " of sequence " +
            std::to_string(e.sequence) + " is past its context of " +
            std::to_string(n_ctx_seq_) + " tokens (sequence_context_tokens)");
      }
      if (e.position != next) {
        return Status::InvalidArgument(
            where(i) + "sequence " + std::to_string(e.sequence) + " continues at position " +
            std::to_string(next) + ", not " + std::to_string(e.position));
      }
      ++next;
    }
    if (static_cast<int64_t>(used_cells_) + static_cast<int64_t>(batch.size()) > n_ctx_) {
      return Status::ResourceExhausted("KV cache full: the batch needs " +
                                       std::to_string(batch.size()) + " cells, " + UsageText() +
                                       " (context_tokens)");
    }
    return Status::Ok();
  }

  // Brings the shadow of `sequence` up to where llama.cpp's cache says it ends.
  void SyncSequence(SequenceId sequence) {
    ShadowSequence& s = sequences_[static_cast<size_t>(sequence)];
    const TokenPosition end = llama_memory_seq_pos_max(memory_, sequence) + 1;
    if (s.cells.empty() && end > 0) s.first = llama_memory_seq_pos_min(memory_, sequence);
    while (Length(s) < end) s.cells.push_back(Acquire());
  }

  int32_t Acquire() {
    ++used_cells_;
    if (!free_cells_.empty()) {
      const int32_t cell = free_cells_.back();
      free_cells_.pop_back();
      cell_refs_[static_cast<size_t>(cell)] = 1;
      return cell;
    }
    cell_refs_.push_back(1);
    return static_cast<int32_t>(cell_refs_.size() - 1);
  }
  void Release(int32_t cell) {
    if (--cell_refs_[static_cast<size_t>(cell)] == 0) {
      --used_cells_;
      free_cells_.push_back(cell);
    }
  }

  std::string path_;
  std::string description_;
  std::unique_ptr<LlamaChatTemplate> chat_template_;  // Holds no pointer into model_.
  // Destroyed bottom-up: the context before the thread pool it uses, both before the model.
  std::unique_ptr<llama_model, ModelDeleter> model_;
  std::unique_ptr<ggml_threadpool, ThreadpoolDeleter> threadpool_;
  std::unique_ptr<llama_context, ContextDeleter> context_;
  const llama_vocab* vocab_ = nullptr;
  llama_memory_t memory_ = nullptr;
  llama_batch batch_{};
  int32_t n_vocab_ = 0;
  int32_t n_ctx_train_ = 0;
  int32_t n_ctx_ = 0;
  int32_t n_ctx_seq_ = 0;
  KvCacheLayout layout_ = KvCacheLayout::kPerSequence;
  int32_t n_seq_max_ = 0;
  int32_t n_batch_ = 0;

  std::vector<ShadowSequence> sequences_;
  std::vector<int32_t> cell_refs_;   // Sequences holding each shadow cell; 0: free.
  std::vector<int32_t> free_cells_;  // Shadow cell ids to reuse.
  int32_t used_cells_ = 0;
  std::vector<TokenPosition> next_position_;  // CheckBatch's scratch, per sequence.
  std::vector<const float*> rows_;            // The last Decode's logits rows...
  std::vector<int32_t> row_entries_;          // ...and the batch entry of each.
  std::vector<int32_t> order_;                // Decode: llama.cpp batch index -> entry...
  std::vector<int32_t> slot_;                 // ...and entry -> llama.cpp batch index.
};

}  // namespace

void DecodeBatch::AddTokens(std::span<const TokenId> tokens, TokenPosition first_position,
                            SequenceId sequence, bool logits_for_last) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    Add(tokens[i], first_position + static_cast<TokenPosition>(i), sequence,
        logits_for_last && i + 1 == tokens.size());
  }
}

std::span<const float> DecodeLogits::ForEntry(int32_t entry) const {
  auto it = std::lower_bound(entry_indexes_.begin(), entry_indexes_.end(), entry);
  if (it == entry_indexes_.end() || *it != entry) return {};
  return Row(static_cast<int32_t>(it - entry_indexes_.begin()));
}

Result<std::unique_ptr<GenerativeModel>> LoadGenerativeModel(
    const std::string& path, const GenerativeModelOptions& options) {
  if (Status s = ValidateOptions(options); !s.ok()) return s;
  if (Status s = CheckGgufFile(path); !s.ok()) return s;
  llama_backend::Init();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;  // CPU build; explicit so a GPU-enabled build would not change it.
  ClearLastError();
  llama_model* raw = llama_model_load_from_file(path.c_str(), mp);
  if (raw == nullptr) {
    return Status::InvalidArgument("llama.cpp could not load '" + path + "': " + LastError());
  }
  auto model = std::make_unique<LlamaGenerativeModel>(path, raw);
  if (Status s = model->Init(options); !s.ok()) return s;
  return std::unique_ptr<GenerativeModel>(std::move(model));
}

}  // namespace tailcut
