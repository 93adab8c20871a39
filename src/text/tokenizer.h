// Tokenizer: turns UTF-8 text into the integer ids a text model takes.
//
// The interface is small on purpose: the engine and the server only need ids, a count and
// whether truncation happened. WordPieceTokenizer (wordpiece_tokenizer.h) implements BERT's
// uncased WordPiece exactly as Hugging Face `tokenizers` does for a given tokenizer.json.
//
// Thread-safety: Encode() is const and safe to call concurrently from any number of threads
// once the tokenizer is constructed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace tailcut {

struct EncodeOptions {
  // Longest output in tokens, special tokens ([CLS], [SEP]) included. 0 = the tokenizer's own
  // model maximum (max_length()); larger values are clamped to it. Longer inputs are cut at
  // the end when `truncate` is set.
  int max_length_tokens = 0;
  // When false, an input longer than the limit is an error (kPayloadTooLarge) instead of
  // being cut; this is TEI's `truncate: false`.
  bool truncate = true;
};

struct Encoding {
  std::vector<int64_t> ids;  // [CLS] pieces... [SEP]; attention mask is all ones over ids.
  bool truncated = false;    // True when pieces were dropped to fit max_length_tokens.
  // EncodePair() only: each id's token type (for BERT 0 up to the first [SEP], 1 after it).
  // Empty from Encode(), where every type is 0.
  std::vector<int64_t> type_ids;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Encodes one text. Invalid UTF-8 is not an error: each maximal invalid subsequence is
  // replaced by U+FFFD (as Python's bytes.decode("utf-8", "replace") does), which BERT's
  // text cleaning then drops. Fails only when truncation is off and the text is too long.
  virtual Result<Encoding> Encode(std::string_view utf8, const EncodeOptions& options) const = 0;

  // Encodes a pair of texts as one input, for models that read both at once (cross-encoders,
  // rerankers): the tokenizer's pair form, e.g. [CLS] first [SEP] second [SEP]. A pair over the
  // limit is cut as Hugging Face's "longest_first" does: the longer text first, down to half of
  // the room each. InvalidArgument when the tokenizer has no pair form.
  virtual Result<Encoding> EncodePair(std::string_view first, std::string_view second,
                                      const EncodeOptions& options) const = 0;

  // The model's maximum sequence length in tokens (special tokens included).
  virtual int max_length() const = 0;
  virtual int64_t pad_id() const = 0;
  virtual size_t vocab_size() const = 0;
};

}  // namespace tailcut
