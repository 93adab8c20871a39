// BertNormalizer: Hugging Face's BertNormalizer, step for step and in HF's order:
//   1. clean_text: drop U+0000, U+FFFD and control characters; whitespace becomes ' '.
//   2. handle_chinese_chars: surround each CJK ideograph with spaces.
//   3. strip_accents: NFD (with canonical reordering), then drop nonspacing marks (Mn).
//   4. lowercase: per code point, full mapping (Rust char::to_lowercase; no context rules, so
//      a final capital sigma becomes σ, not ς).
// Character classes come from UnicodeProps, i.e. HF's view of Unicode (see unicode_props.h).
//
// Thread-safety: immutable after construction; Normalize() is const and uses only the
// caller's buffers, so one instance may serve any number of threads.
#pragma once

#include <string_view>
#include <vector>

#include "text/unicode_props.h"

namespace tailcut {

struct BertNormalizerOptions {
  bool clean_text = true;
  bool handle_chinese_chars = true;
  // HF's `strip_accents: null` means "same as lowercase"; the parser resolves that.
  bool strip_accents = true;
  bool lowercase = true;
};

class BertNormalizer {
 public:
  explicit BertNormalizer(const BertNormalizerOptions& options = {});

  // Normalizes well-formed UTF-8 `text` into code points in `out` (cleared first). `scratch`
  // is a caller-owned buffer reused between calls so that steady state allocates nothing.
  void Normalize(std::string_view text, std::vector<char32_t>& out,
                 std::vector<char32_t>& scratch) const;

  // The same for one code point, used to derive the ASCII fast path's table.
  std::vector<char32_t> NormalizeCodePoint(char32_t cp) const;

  const BertNormalizerOptions& options() const { return options_; }

 private:
  // Step 3: decompose into `out`, reorder, and drop marks.
  void StripAccents(const std::vector<char32_t>& in, std::vector<char32_t>& out) const;

  BertNormalizerOptions options_;
  const UnicodeProps& props_;
};

}  // namespace tailcut
