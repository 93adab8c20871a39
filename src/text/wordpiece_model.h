// WordPieceModel: Hugging Face's WordPiece model. Splits one pre-tokenized word into the
// longest vocab pieces, greedily from the left; every piece after the first is looked up with
// the continuing-subword prefix ("##"). A word that cannot be covered, or that is longer than
// max_input_chars_per_word code points, becomes the single unknown token.
//
// Thread-safety: immutable after Create(); TokenizeWord() is const and safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "text/vocab.h"

namespace tailcut {

struct WordPieceConfig {
  std::string unk_token = "[UNK]";
  std::string continuing_subword_prefix = "##";
  size_t max_input_chars_per_word = 100;
};

class WordPieceModel {
 public:
  // Fails (InvalidArgument) when the unknown token is not in the vocab.
  static Result<WordPieceModel> Create(const VocabEntries& vocab, const WordPieceConfig& config);

  // Appends the ids of `word` (UTF-8, `num_chars` code points) to `out`.
  void TokenizeWord(std::string_view word, size_t num_chars, std::vector<int64_t>& out) const;

  // The id of a whole token, or VocabMap::kNotFound.
  int64_t TokenToId(std::string_view token) const { return vocab_.Find(token); }
  size_t vocab_size() const { return vocab_.size(); }
  int64_t unk_id() const { return unk_id_; }
  const WordPieceConfig& config() const { return config_; }

 private:
  WordPieceConfig config_;
  VocabMap vocab_;         // Every token, for the first piece of a word.
  VocabMap continuation_;  // Tokens that start with the prefix, stored without it.
  int64_t unk_id_ = 0;
};

}  // namespace tailcut
