// BertPreTokenizer: Hugging Face's BertPreTokenizer over normalized code points. Splits on
// whitespace (Rust char::is_whitespace; dropped) and isolates every punctuation character
// (ASCII punctuation or Unicode P*, as HF's tables see it) as a word of its own.
//
// Thread-safety: stateless apart from a reference to the immutable UnicodeProps; safe to use
// from any number of threads.
#pragma once

#include <cstddef>
#include <span>

#include "text/unicode_props.h"

namespace tailcut {

class BertPreTokenizer {
 public:
  BertPreTokenizer() : props_(UnicodeProps::Get()) {}

  // Calls on_word(std::span<const char32_t>) for each non-empty word of `text`, in order,
  // pointing into `text` (no copies). Stops early when on_word returns false.
  template <typename OnWord>
  void ForEachWord(std::span<const char32_t> text, OnWord&& on_word) const {
    using B = CodePointInfo::Bit;
    size_t start = 0;
    for (size_t i = 0; i < text.size(); ++i) {
      const CodePointInfo info = props_.Lookup(text[i]);
      if (!info.Has(B::kWhiteSpace) && !info.Has(B::kPunctuation)) continue;
      if (i > start && !on_word(text.subspan(start, i - start))) return;
      if (info.Has(B::kPunctuation) && !info.Has(B::kWhiteSpace) && !on_word(text.subspan(i, 1))) {
        return;
      }
      start = i + 1;
    }
    if (text.size() > start) on_word(text.subspan(start));
  }

 private:
  const UnicodeProps& props_;
};

}  // namespace tailcut
