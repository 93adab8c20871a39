#include "text/wordpiece_model.h"

#include <algorithm>

namespace tailcut {
namespace {

bool IsContinuationByte(char c) {
  return (static_cast<unsigned char>(c) & 0xC0) == 0x80;
}

}  // namespace

Result<WordPieceModel> WordPieceModel::Create(const VocabEntries& vocab,
                                              const WordPieceConfig& config) {
  WordPieceModel model;
  model.config_ = config;
  model.vocab_ = VocabMap::Build(vocab);
  // Looking continuation pieces up without the prefix means the hot loop never has to build
  // "##" + piece strings.
  VocabEntries continuation;
  const std::string& prefix = config.continuing_subword_prefix;
  for (const auto& [token, id] : vocab) {
    if (token.starts_with(prefix)) continuation.emplace_back(token.substr(prefix.size()), id);
  }
  model.continuation_ = VocabMap::Build(continuation);
  model.unk_id_ = model.vocab_.Find(config.unk_token);
  if (model.unk_id_ == VocabMap::kNotFound) {
    return Status::InvalidArgument("WordPiece unk_token '" + config.unk_token +
                                   "' is not in the vocab");
  }
  return model;
}

void WordPieceModel::TokenizeWord(std::string_view word, size_t num_chars,
                                  std::vector<int64_t>& out) const {
  if (num_chars > config_.max_input_chars_per_word) {
    out.push_back(unk_id_);
    return;
  }
  const size_t rollback = out.size();
  size_t start = 0;
  while (start < word.size()) {
    const VocabMap& map = start == 0 ? vocab_ : continuation_;
    // No key is longer than max_key_length(), so start there instead of at the word's end;
    // back up to a code point boundary as HF only ever tries whole characters.
    size_t end = std::min(word.size(), start + map.max_key_length());
    while (end > start && end < word.size() && IsContinuationByte(word[end])) --end;
    int64_t id = VocabMap::kNotFound;
    while (end > start) {
      id = map.Find(word.substr(start, end - start));
      if (id != VocabMap::kNotFound) break;
      --end;  // Drop the last code point.
      while (end > start && IsContinuationByte(word[end])) --end;
    }
    if (id == VocabMap::kNotFound) {
      // Some position cannot start any piece: the whole word is unknown.
      out.resize(rollback);
      out.push_back(unk_id_);
      return;
    }
    out.push_back(id);
    start = end;
  }
}

}  // namespace tailcut
