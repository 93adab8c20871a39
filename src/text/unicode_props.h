// UnicodeProps: per-code-point facts the BERT normalizer and pre-tokenizer need, exactly as
// Hugging Face `tokenizers` sees them.
//
// Built once per process from utf8proc plus the generated HF overrides (unicode_overrides.h),
// into a two-stage lookup table (256-entry blocks, identical blocks shared) so a lookup is two
// loads and no branching on Unicode ranges. Full decompositions and lowercase mappings live in
// a side pool, reached through a 16-bit index stored in the entry.
//
// Thread-safety: Get() builds the table on first use (thread-safe static initialisation);
// afterwards everything is immutable and safe to read from any thread.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace tailcut {

// One code point's properties, packed in 32 bits.
class CodePointInfo {
 public:
  enum Bit : uint32_t {
    kControl = 1u << 0,         // clean_text drops it (HF is_control: C* minus \t \n \r).
    kBertWhitespace = 1u << 1,  // clean_text maps it to ' ' (\t \n \r or White_Space).
    kWhiteSpace = 1u << 2,      // The pre-tokenizer splits on it (Rust char::is_whitespace).
    kPunctuation = 1u << 3,     // The pre-tokenizer isolates it.
    kChinese = 1u << 4,         // handle_chinese_chars pads it with spaces.
    kNonspacingMark = 1u << 5,  // strip_accents drops it (after NFD).
    kDecomposes = 1u << 6,      // NFD changes it.
    kLowercases = 1u << 7,      // Lowercasing changes it.
  };

  constexpr CodePointInfo() = default;
  constexpr explicit CodePointInfo(uint32_t bits) : bits_(bits) {}

  constexpr bool Has(Bit bit) const { return (bits_ & bit) != 0; }
  constexpr uint8_t combining_class() const { return static_cast<uint8_t>(bits_ >> 8); }
  constexpr uint16_t extra_index() const { return static_cast<uint16_t>(bits_ >> 16); }
  constexpr uint32_t bits() const { return bits_; }

 private:
  uint32_t bits_ = 0;
};

class UnicodeProps {
 public:
  // The process-wide table; the first call builds it (tens of milliseconds).
  static const UnicodeProps& Get();

  CodePointInfo Lookup(char32_t cp) const {
    if (cp > 0x10FFFF) cp = 0xFFFD;  // Not reachable from the decoder; keeps lookups in range.
    return CodePointInfo(stage2_[(size_t{stage1_[cp >> 8]} << 8) | (cp & 0xFF)]);
  }

  // Appends HF's full canonical decomposition of `cp` (which has kDecomposes) to `out`.
  void AppendDecomposition(char32_t cp, CodePointInfo info, std::vector<char32_t>& out) const;

  // HF's lowercase of `cp`, which has kLowercases (one to three code points).
  std::u32string_view Lowercase(CodePointInfo info) const {
    const Extra& e = extras_[info.extra_index()];
    return {pool_.data() + e.lower_offset, e.lower_length};
  }

  // The Unicode version of the linked utf8proc, for the check that the overrides still apply.
  static std::string_view Utf8procUnicodeVersion();

 private:
  struct Extra {
    uint32_t decomp_offset = 0;
    uint32_t lower_offset = 0;
    uint8_t decomp_length = 0;
    uint8_t lower_length = 0;
  };

  UnicodeProps();

  std::vector<uint16_t> stage1_;  // cp >> 8 -> block number.
  std::vector<uint32_t> stage2_;  // block number * 256 + (cp & 0xFF) -> CodePointInfo bits.
  std::vector<Extra> extras_;
  std::vector<char32_t> pool_;
};

}  // namespace tailcut
