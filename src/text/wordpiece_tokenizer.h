// WordPieceTokenizer: BERT-style WordPiece tokenization that reproduces Hugging Face
// `tokenizers` exactly for a BertNormalizer + BertPreTokenizer + WordPiece tokenizer.json
// (e.g. all-MiniLM-L6-v2): same ids for every input, including invalid UTF-8 (see utf8.h),
// literal special tokens in the text (added_tokens.h) and all of Unicode (unicode_props.h).
//
// Encode() pipeline: repair invalid UTF-8 -> split out added tokens -> for each text run,
// normalize + pre-tokenize (a per-byte table when the run is ASCII, the general Unicode path
// otherwise) -> WordPiece per word -> truncate to the limit -> add [CLS] ... [SEP].
// Text runs are cut into spans at ASCII whitespace (exact: see NextSpan), so that ASCII words
// take the fast path even in mixed text and truncated encodes stop soon after the limit
// instead of normalising the whole text.
//
// Thread-safety: immutable after construction. Encode() is const and safe to call concurrently;
// it keeps its working buffers in thread_local storage so that steady state does not allocate
// beyond the returned ids.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "text/added_tokens.h"
#include "text/ascii_fast_path.h"
#include "text/bert_normalizer.h"
#include "text/bert_pre_tokenizer.h"
#include "text/tokenizer.h"
#include "text/tokenizer_json.h"
#include "text/wordpiece_model.h"

namespace tailcut {

class WordPieceTokenizer final : public Tokenizer {
 public:
  static constexpr int kDefaultMaxLength = 256;

  // Loads a Hugging Face tokenizer.json. Errors name the file: NotFound when it cannot be
  // opened, InvalidArgument when it is corrupt or uses a component this class does not
  // reproduce exactly. `max_length_tokens` (special tokens included) is the model maximum;
  // the file's own truncation / padding settings are ignored.
  static Result<std::unique_ptr<WordPieceTokenizer>> FromTokenizerJson(
      const std::string& path, int max_length_tokens = kDefaultMaxLength);

  // Loads a BERT vocab.txt with the classic BERT settings: BertNormalizer (clean text, CJK
  // splitting, lowercase and accent stripping when `lowercase`), WordPiece with [UNK] and "##",
  // [CLS] text [SEP], and [PAD] [UNK] [CLS] [SEP] [MASK] matched in raw text.
  static Result<std::unique_ptr<WordPieceTokenizer>> FromVocabTxt(
      const std::string& path, int max_length_tokens = kDefaultMaxLength, bool lowercase = true);

  // From an already parsed specification; `source` names it in error messages.
  static Result<std::unique_ptr<WordPieceTokenizer>> FromSpec(const TokenizerSpec& spec,
                                                              int max_length_tokens,
                                                              const std::string& source);

  // Effective limit: options.max_length_tokens, or max_length() when 0; values above
  // max_length() are clamped to it. InvalidArgument if negative or smaller than the number of
  // special tokens; PayloadTooLarge (naming the token count and the limit) if the text does not
  // fit and options.truncate is false.
  Result<Encoding> Encode(std::string_view utf8, const EncodeOptions& options) const override;

  // The file's pair template (TemplateProcessing "pair", BertProcessing, or classic BERT for a
  // vocab.txt); same limits and errors as Encode(), the special tokens of the pair form counted.
  // Both texts are encoded in full only when both exceed the room and it is odd: which one is
  // longer then decides which keeps the extra token, as in HF.
  Result<Encoding> EncodePair(std::string_view first, std::string_view second,
                              const EncodeOptions& options) const override;

  int max_length() const override { return max_length_; }
  int64_t pad_id() const override { return pad_id_; }
  // Like HF's get_vocab_size(with_added_tokens=true).
  size_t vocab_size() const override { return vocab_size_; }

  // [CLS]/[SEP] and the like that Encode() adds around the text.
  size_t num_special_tokens() const { return prefix_ids_.size() + suffix_ids_.size(); }
  // The id of a token (added tokens first, then the vocab), or -1.
  int64_t TokenToId(std::string_view token) const;

 private:
  struct Scratch;
  // This thread's working buffers, shared by Encode() and EncodePair() (neither calls the other).
  static Scratch& ThreadScratch();

  WordPieceTokenizer(const TokenizerSpec& spec, WordPieceModel model, AsciiFastPath ascii,
                     int max_length);

  // Normalizes, pre-tokenizes and WordPiece-encodes a run of well-formed UTF-8 without added
  // tokens, appending ids to `out`. Returns false once out.size() reached `stop_at`.
  bool EncodeText(std::string_view text, Scratch& scratch, std::vector<int64_t>& out,
                  size_t stop_at) const;
  // One text (any bytes): repairs invalid UTF-8, splits out added tokens and encodes the rest,
  // appending to `out` until out.size() reaches `stop_at` (the largest size_t: all of it).
  void EncodePieces(std::string_view utf8, Scratch& scratch, std::vector<int64_t>& out,
                    size_t stop_at) const;
  // The effective limit for options (see Encode()), checked against `specials`.
  Result<size_t> LimitFor(const EncodeOptions& options, size_t specials) const;

  BertNormalizer normalizer_;
  BertPreTokenizer pre_tokenizer_;
  AsciiFastPath ascii_;
  WordPieceModel model_;
  AddedTokenMatcher added_tokens_;
  std::vector<AddedToken> added_token_list_;
  std::vector<int64_t> prefix_ids_;
  std::vector<int64_t> suffix_ids_;
  std::optional<PairTemplate> pair_;
  int max_length_;
  int64_t pad_id_;
  size_t vocab_size_;
};

}  // namespace tailcut
