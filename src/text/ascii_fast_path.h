// AsciiFastPath: BertNormalizer + BertPreTokenizer collapsed into one table lookup per byte, for
// text that is entirely ASCII (most English requests). For ASCII every normalisation step acts
// on one character at a time (no decomposition, no reordering, no expansion), so the table is
// derived by running the real normalizer and pre-tokenizer rules on each of the 128 characters;
// the fast path is thus equivalent to the general one by construction.
//
// Thread-safety: immutable after Build(); ForEachWord() is const and only touches the caller's
// buffer, so it is safe from any number of threads.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"
#include "text/bert_normalizer.h"

namespace tailcut {

class AsciiFastPath {
 public:
  // Fails (Internal) if an ASCII character would normalize to something else than at most one
  // ASCII character, which BERT's rules never do; the caller then must not use the fast path.
  static Result<AsciiFastPath> Build(const BertNormalizer& normalizer);

  // Calls on_word(std::string_view) for each word of the all-ASCII `text`, using `word` as the
  // buffer. Stops early when on_word returns false; returns false if it stopped early.
  template <typename OnWord>
  bool ForEachWord(std::string_view text, std::string& word, OnWord&& on_word) const {
    word.clear();
    for (const char ch : text) {
      const Action a = actions_[static_cast<unsigned char>(ch) & 0x7F];
      switch (a.kind) {
        case Kind::kDrop:
          break;
        case Kind::kChar:
          word.push_back(a.ch);
          break;
        case Kind::kSplit:
        case Kind::kPunct:
          if (!word.empty()) {
            if (!on_word(std::string_view(word))) return false;
            word.clear();
          }
          if (a.kind == Kind::kPunct && !on_word(std::string_view(&a.ch, 1))) return false;
          break;
      }
    }
    return word.empty() || on_word(std::string_view(word));
  }

 private:
  enum class Kind : uint8_t { kDrop, kChar, kSplit, kPunct };
  struct Action {
    Kind kind = Kind::kDrop;
    char ch = 0;  // The normalized character, for kChar and kPunct.
  };

  std::array<Action, 128> actions_{};
};

}  // namespace tailcut
