// AddedTokenMatcher: finds a tokenizer's added tokens ([CLS], [SEP], [MASK], ...) in raw input
// text, before normalisation, the way Hugging Face does for tokens with normalized=false: exact
// (case-sensitive) byte match, leftmost-longest, non-overlapping. A literal "[SEP]" typed by a
// user therefore becomes the [SEP] id, while "[sep]" is ordinary text.
//
// Thread-safety: immutable after construction; Split() is const and safe from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace tailcut {

struct AddedToken {
  std::string content;
  int64_t id = 0;
};

class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  // Empty contents are ignored (HF ignores them too).
  explicit AddedTokenMatcher(std::vector<AddedToken> tokens);

  // Walks `text` left to right: on_text(std::string_view) for each non-empty run between
  // matches, on_token(int64_t id) for each match. Either callback returns false to stop.
  template <typename OnText, typename OnToken>
  void Split(std::string_view text, OnText&& on_text, OnToken&& on_token) const {
    size_t run_start = 0;
    size_t i = 0;
    while (i < text.size()) {
      if (!first_byte_[static_cast<unsigned char>(text[i])]) {
        ++i;
        continue;
      }
      const AddedToken* best = Match(text, i);
      if (best == nullptr) {
        ++i;
        continue;
      }
      if (i > run_start && !on_text(text.substr(run_start, i - run_start))) return;
      if (!on_token(best->id)) return;
      i += best->content.size();
      run_start = i;
    }
    if (text.size() > run_start) on_text(text.substr(run_start));
  }

  bool empty() const { return tokens_.empty(); }

 private:
  // The longest token that starts at text[pos], or nullptr.
  const AddedToken* Match(std::string_view text, size_t pos) const;

  std::vector<AddedToken> tokens_;  // Longest first, so the first hit is the longest.
  std::array<bool, 256> first_byte_{};
};

}  // namespace tailcut
