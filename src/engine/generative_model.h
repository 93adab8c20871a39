// GenerativeModel: a decoder-only language model (a GGUF file, run by llama.cpp) as a
// generation scheduler sees it: its vocabulary and chat template, one Decode() step over a
// batch that mixes several sequences (prompt prefill and generated tokens alike), and the
// per-sequence state of its KV cache. The scheduler above decides what goes in each batch;
// this layer only checks that a batch is well formed and runs it.
//
// The KV cache holds context_tokens() cells in one of two layouts (KvCacheLayout): a stream of
// its own for each sequence (the default, as llama-server's slots have), or one pool shared by
// all (llama.cpp's unified cache), where tokens shared through CopyPrefix() take one cell for
// all their sequences. Either way each cached token of a sequence takes a cell of its
// sequence_context_tokens(), and the scheduler budgets cells against context_tokens().
//
// Only the engine's *_llama.cc files include llama.h; nothing here names a llama.cpp type.
//
// Thread-safety: a GenerativeModel is driven by one thread, the step loop: Decode() and the KV
// operations (and everything not marked otherwise) must not be called concurrently. The
// vocabulary methods marked "any thread" read only state fixed at load, so request threads may
// tokenise, detokenise and render chat templates while the step loop decodes.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace tailcut {

using TokenId = int32_t;
// A sequence: one stream of tokens in the KV cache, 0 .. max_sequences() - 1.
using SequenceId = int32_t;
// A token's position in its sequence: 0 for the first.
using TokenPosition = int32_t;
inline constexpr TokenId kNoToken = -1;

// How the KV cache's cells are laid out between sequences.
enum class KvCacheLayout {
  // Each sequence has a stream of context_tokens / max_sequences cells (rounded up to a
  // multiple of 256 by llama.cpp) that only it uses. Its attention then runs over its own
  // cells alone, so a greedy answer is the same bit for bit whichever other sequences run
  // beside it: with one shared pool the attention sums run over every sequence's cells (the
  // others masked) and group differently, which flips near-ties (measured: 5 to 11 of 24
  // greedy chat answers changed when 8 ran together, 0 of 24 with this layout). The cost: a
  // sequence can never use more than its stream, and CopyPrefix copies cells rather than
  // sharing them. llama-server's default (-np N without --kv-unified) is the same.
  kPerSequence,
  // One pool of context_tokens cells for all sequences: a long sequence may use what short
  // ones leave, and CopyPrefix shares cells. Answers then depend (slightly) on the batch.
  kShared,
};

struct GenerativeModelOptions {
  // KV-cache capacity in tokens (cells) for all sequences together: bounds the sum of the
  // live sequences' cached lengths (kShared: with a prefix shared through CopyPrefix counted
  // once; kPerSequence: each sequence within its own share). Memory is allocated for all of it
  // at load (SmolLM2-135M: 22.5 KiB per token). 0 takes the model's trained context (per
  // sequence, for kPerSequence); a sequence may not hold more than that (no RoPE scaling).
  int32_t context_tokens = 4096;
  KvCacheLayout kv_cache_layout = KvCacheLayout::kPerSequence;
  // Sequences the cache can hold at once (ids 0 .. max_sequences - 1): the most requests one
  // model generates for concurrently. Costs bookkeeping only, not memory.
  int32_t max_sequences = 8;
  // Most entries one Decode() takes; llama.cpp computes a batch in pieces of this size too, so
  // it bounds the scratch memory and the longest step. A longer prompt is fed in chunks.
  int32_t batch_tokens = 512;
  // Threads for a step of exactly one entry (one sequence generating alone). ggml's threads
  // meet at a spinning barrier after every operator, so a thread that loses its core stalls
  // the others: on 2 cores shared with other work, a step with 2 threads took 10 to 470 ms,
  // with 1 a steady 13 to 16 (BENCHMARKS.md, "Generative engine"). More than 1 only on cores
  // kept for this model.
  int32_t decode_threads = 1;
  // Threads for a step of more than one entry (prefill, several sequences generating); the
  // same caveat.
  int32_t batch_threads = 1;
  // How long the compute threads spin waiting for the next step before they sleep, 0 (sleep at
  // once) .. 100 (spin hard). Spinning saves a wake-up per step but holds cores that the
  // embedding path and the IO threads share, so 0 unless the machine is dedicated. Measured
  // through the server with 2 threads and 4 streams: 43-45 ms between tokens at 0, 35-37 at
  // 50 (llama-server's default; it gave 29-32). model.yaml: thread_poll_level.
  int32_t thread_poll_level = 0;
  // Jinja source rendered instead of the GGUF's tokenizer.chat_template when not empty (as
  // llama-server's --chat-template).
  std::string chat_template;
};

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" (what the template knows).
  std::string content;
};

// One token for Decode(): which sequence it extends, at which position, and whether the
// caller wants the logits that predict the token after it.
struct DecodeEntry {
  TokenId token = kNoToken;
  TokenPosition position = 0;
  SequenceId sequence = 0;
  bool logits = false;
};

// The entries of one Decode() step, any mix of sequences. A sequence's entries must continue
// it: consecutive positions starting at SequenceLength(sequence).
struct DecodeBatch {
  std::vector<DecodeEntry> entries;

  void Add(TokenId token, TokenPosition position, SequenceId sequence, bool logits) {
    entries.push_back({token, position, sequence, logits});
  }
  // tokens[i] at first_position + i; logits for the last token only (the prefill pattern).
  void AddTokens(std::span<const TokenId> tokens, TokenPosition first_position,
                 SequenceId sequence, bool logits_for_last);
  void Clear() { entries.clear(); }
  size_t size() const { return entries.size(); }
  bool empty() const { return entries.empty(); }
};

// The logits one Decode() produced: a row of vocab_size() floats for each entry that asked,
// in batch order. A view into the model's buffers, valid until the next Decode() or
// ClearCache() on the same model; copy a row to keep it longer.
class DecodeLogits {
 public:
  DecodeLogits() = default;
  DecodeLogits(std::span<const float* const> rows, std::span<const int32_t> entry_indexes,
               int32_t vocab_size)
      : rows_(rows), entry_indexes_(entry_indexes), vocab_size_(vocab_size) {}

  int32_t rows() const { return static_cast<int32_t>(rows_.size()); }
  int32_t vocab_size() const { return vocab_size_; }
  std::span<const float> Row(int32_t row) const {
    return {rows_[static_cast<size_t>(row)], static_cast<size_t>(vocab_size_)};
  }
  // The index in DecodeBatch::entries that row `row` belongs to.
  int32_t EntryIndex(int32_t row) const { return entry_indexes_[static_cast<size_t>(row)]; }
  // The row of batch entry `entry`; empty when that entry did not ask for logits.
  std::span<const float> ForEntry(int32_t entry) const;

 private:
  std::span<const float* const> rows_;
  std::span<const int32_t> entry_indexes_;
  int32_t vocab_size_ = 0;
};

struct KvCacheUsage {
  int32_t used_cells = 0;      // Cells holding a token of at least one sequence.
  int32_t capacity_cells = 0;  // context_tokens().
  int32_t free_cells() const { return capacity_cells - used_cells; }
};

class GenerativeModel {
 public:
  virtual ~GenerativeModel() = default;

  // --- The model (any thread) ---------------------------------------------------------------
  virtual const std::string& path() const = 0;
  // llama.cpp's one-line summary: architecture, size class, quantisation (SmolLM2-135M reads
  // "llama 256M Q4_1": the class comes from the layer shape, not a parameter count).
  virtual const std::string& description() const = 0;
  virtual int32_t vocab_size() const = 0;
  // The context length the model was trained with (GGUF metadata).
  virtual int32_t trained_context_tokens() const = 0;
  // The KV cache's capacity in tokens (GenerativeModelOptions::context_tokens, as allocated).
  virtual int32_t context_tokens() const = 0;
  // The most tokens one sequence can hold: its stream (kPerSequence) or the whole cache
  // (kShared). A prompt plus its generated tokens must fit in it.
  virtual int32_t sequence_context_tokens() const = 0;
  virtual KvCacheLayout kv_cache_layout() const = 0;
  virtual int32_t max_sequences() const = 0;
  virtual int32_t batch_tokens() const = 0;

  // --- Vocabulary (any thread) --------------------------------------------------------------
  // Token ids for `text`. add_special adds BOS/EOS where the model's tokenizer says to (for a
  // raw prompt; a rendered chat template already holds its markers). parse_special turns the
  // text of special tokens ("<|im_start|>") into those tokens, as a rendered template needs;
  // without it they are plain text, as user input should be.
  virtual Result<std::vector<TokenId>> Tokenize(std::string_view text, bool add_special,
                                                bool parse_special) const = 0;
  // The bytes of one token. A multi-byte UTF-8 character may be split across tokens (byte
  // fallback), so a piece need not be valid UTF-8 alone: streaming callers hold back an
  // incomplete trailing character until the next piece completes it. render_special writes
  // control tokens as their text ("<|im_end|>"); otherwise they are empty.
  virtual std::string TokenToPiece(TokenId token, bool render_special) const = 0;
  // The text of a whole token sequence (the inverse of Tokenize).
  virtual Result<std::string> Detokenize(std::span<const TokenId> tokens,
                                         bool render_special) const = 0;
  // `messages` rendered with the model's own chat template (the GGUF's
  // tokenizer.chat_template, a Jinja program) exactly as llama-server renders it, the BOS it
  // adds included; with add_generation_prompt the text ends with the opening of an assistant
  // turn. Tokenize the result with parse_special and without add_special. A template that
  // llama.cpp's Jinja engine cannot parse falls back to its built-in rendering of the family.
  // Fails (FailedPrecondition) when the model has no template or the fallback does not
  // recognise it, and (InvalidArgument, with the template's message) when the template refuses
  // the messages, e.g. its raise_exception for roles out of order.
  virtual Result<std::string> ApplyChatTemplate(std::span<const ChatMessage> messages,
                                                bool add_generation_prompt) const = 0;
  // Special tokens, kNoToken when the model has none.
  virtual TokenId bos_token() const = 0;
  virtual TokenId eos_token() const = 0;
  virtual TokenId eot_token() const = 0;  // End of turn (ChatML's <|im_end|>).
  // Whether generating `token` ends the answer: EOS, EOT, or another end-of-generation token
  // the GGUF declares.
  virtual bool IsEndOfGeneration(TokenId token) const = 0;

  // --- Decoding (the step-loop thread) ------------------------------------------------------
  // Runs one forward pass over `batch` and appends its tokens to their sequences' cache.
  // Checks first, naming the entry and the limit: the batch is non-empty and at most
  // batch_tokens() long; tokens are in the vocabulary; sequences are in range; each sequence's
  // positions continue it; no position reaches sequence_context_tokens(); the new tokens fit
  // in the free cells of their sequence's stream (kPerSequence) or of the pool (kShared;
  // kResourceExhausted: the caller may retry after freeing some). A refused batch changes
  // nothing. Entries may come in any order (the engine reorders them for llama.cpp, which
  // computes a batch over per-sequence streams once per run of consecutive sequence ids, so a
  // caller that keeps its running sequences on low, adjacent ids gets one graph run a step);
  // the logits rows are in entry order.
  virtual Result<DecodeLogits> Decode(const DecodeBatch& batch) = 0;

  // --- KV cache (the step-loop thread) ------------------------------------------------------
  // The position the next token of `sequence` takes: one past its last cached token, 0 when it
  // holds none.
  virtual TokenPosition SequenceLength(SequenceId sequence) const = 0;
  // Drops every cached token of `sequence`; cells no other sequence shares become free.
  virtual Status RemoveSequence(SequenceId sequence) = 0;
  // Drops `sequence`'s tokens at positions [begin, end), end < 0 meaning to its end. The rest
  // must stay contiguous, so the range is a suffix (to roll back tokens) or a prefix (to
  // forget the oldest ones; positions are not shifted, so the sequence still ends at
  // context_tokens()).
  virtual Status RemoveTokens(SequenceId sequence, TokenPosition begin, TokenPosition end) = 0;
  // Makes the empty sequence `destination` hold `source`'s tokens at positions [0, length),
  // continuing at position `length`: kShared shares the cells; kPerSequence copies them into
  // the destination's stream (at the next Decode()).
  virtual Status CopyPrefix(SequenceId source, SequenceId destination, TokenPosition length) = 0;
  // Empties every sequence.
  virtual void ClearCache() = 0;
  virtual KvCacheUsage CacheUsage() const = 0;
};

// Loads the GGUF file at `path` and allocates its context (KV cache, compute buffers, threads)
// per `options`. Errors name the file: kNotFound when it is missing; kInvalidArgument when it
// is not a GGUF file, llama.cpp cannot load it, the architecture is not a plain decoder
// (recurrent, hybrid and encoder-decoder models have no per-token KV cells), or the options are
// out of range (the message names the option and the limit).
Result<std::unique_ptr<GenerativeModel>> LoadGenerativeModel(const std::string& path,
                                                             const GenerativeModelOptions& options);

}  // namespace tailcut
