#include "text/unicode_props.h"

#include <utf8proc.h>

#include <algorithm>
#include <cassert>
#include <cstring>
#include <iterator>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "text/unicode_overrides.h"

namespace tailcut {
namespace {

constexpr char32_t kCodePointLimit = 0x110000;
constexpr size_t kBlockSize = 256;

// Hangul syllables decompose algorithmically (Unicode section 3.12); storing their 11,172
// decompositions would triple the pool.
constexpr char32_t kHangulSBase = 0xAC00;
constexpr char32_t kHangulLBase = 0x1100;
constexpr char32_t kHangulVBase = 0x1161;
constexpr char32_t kHangulTBase = 0x11A7;
constexpr char32_t kHangulTCount = 28;
constexpr char32_t kHangulNCount = 21 * 28;
constexpr char32_t kHangulSCount = 19 * 21 * 28;

bool IsSurrogate(char32_t cp) {
  return cp >= 0xD800 && cp <= 0xDFFF;
}

// Rust's char::is_whitespace, i.e. the White_Space property (stable since Unicode 6.3).
constexpr char32_t kWhiteSpaceList[] = {0x09, 0x0A,   0x0B,   0x0C,   0x0D,   0x20,   0x85,
                                        0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000};

bool IsWhiteSpace(char32_t cp) {
  if (cp >= 0x2000 && cp <= 0x200A) return true;
  return std::find(std::begin(kWhiteSpaceList), std::end(kWhiteSpaceList), cp) !=
         std::end(kWhiteSpaceList);
}

bool IsAsciiPunctuation(char32_t cp) {
  return (cp >= 0x21 && cp <= 0x2F) || (cp >= 0x3A && cp <= 0x40) || (cp >= 0x5B && cp <= 0x60) ||
         (cp >= 0x7B && cp <= 0x7E);
}

// The "CJK" ranges of is_chinese_char in HF's normalizers/bert.rs (and Google's original BERT).
// Not the whole CJK story on purpose (e.g. 2B820..2B91F is missing there too): parity first.
bool IsBertChinese(char32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

// The base rules, from utf8proc. tools/gen_unicode_overrides.py mirrors them exactly (that is
// how it knows which code points need an override); change both together.
uint32_t BaseBits(char32_t cp, const utf8proc_property_t& prop) {
  using B = CodePointInfo::Bit;
  uint32_t bits = 0;
  const bool tab_or_newline = cp == '\t' || cp == '\n' || cp == '\r';
  switch (prop.category) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
      if (!tab_or_newline) bits |= B::kControl;
      break;
    case UTF8PROC_CATEGORY_PC:
    case UTF8PROC_CATEGORY_PD:
    case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE:
    case UTF8PROC_CATEGORY_PI:
    case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO:
      bits |= B::kPunctuation;
      break;
    case UTF8PROC_CATEGORY_MN:
      bits |= B::kNonspacingMark;
      break;
    default:
      break;
  }
  if (IsAsciiPunctuation(cp)) bits |= B::kPunctuation;
  if (IsWhiteSpace(cp)) bits |= B::kWhiteSpace;
  if (tab_or_newline || IsWhiteSpace(cp)) bits |= B::kBertWhitespace;
  if (IsBertChinese(cp)) bits |= B::kChinese;
  bits |= static_cast<uint32_t>(prop.combining_class & 0xFF) << 8;
  return bits;
}

void ApplyBoolOverrides(std::span<const unicode_overrides::BoolRange> ranges,
                        CodePointInfo::Bit bit, std::vector<uint32_t>& flat) {
  for (const auto& r : ranges) {
    for (char32_t cp = r.first; cp <= r.last; ++cp) {
      flat[cp] = r.value ? (flat[cp] | bit) : (flat[cp] & ~uint32_t{bit});
    }
  }
}

using MappingTable = std::unordered_map<char32_t, std::u32string>;

void ApplyMappingOverrides(std::span<const unicode_overrides::MappingOverride> overrides,
                           CodePointInfo::Bit bit, std::vector<uint32_t>& flat,
                           MappingTable& table) {
  for (const auto& o : overrides) {
    if (o.mapping.size() == 1 && o.mapping[0] == o.cp) {
      flat[o.cp] &= ~uint32_t{bit};
      table.erase(o.cp);
    } else {
      flat[o.cp] |= bit;
      table[o.cp] = std::u32string(o.mapping);
    }
  }
}

}  // namespace

const UnicodeProps& UnicodeProps::Get() {
  static const UnicodeProps* const props = new UnicodeProps();  // Never destroyed: no exit races.
  return *props;
}

std::string_view UnicodeProps::Utf8procUnicodeVersion() {
  return utf8proc_unicode_version();
}

UnicodeProps::UnicodeProps() {
  using B = CodePointInfo::Bit;
  std::vector<uint32_t> flat(kCodePointLimit);
  MappingTable decompositions;
  MappingTable lowercases;
  utf8proc_int32_t buf[16];
  for (char32_t cp = 0; cp < kCodePointLimit; ++cp) {
    const auto* prop = utf8proc_get_property(static_cast<utf8proc_int32_t>(cp));
    uint32_t bits = BaseBits(cp, *prop);
    if (!IsSurrogate(cp)) {
      if (cp - kHangulSBase < kHangulSCount) {
        bits |= B::kDecomposes;
      } else if (prop->decomp_seqindex != UINT16_MAX) {
        int boundclass = 0;
        const auto n = utf8proc_decompose_char(static_cast<utf8proc_int32_t>(cp), buf, 16,
                                               UTF8PROC_DECOMPOSE, &boundclass);
        if (n > 0 && n <= 16 && !(n == 1 && static_cast<char32_t>(buf[0]) == cp)) {
          bits |= B::kDecomposes;
          decompositions[cp].assign(buf, buf + n);
        }
      }
      // utf8proc_tolower is the simple mapping; HF's full mapping differs only where the
      // overrides say so (U+0130, plus letters newer than utf8proc's Unicode).
      const auto lower = static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp)));
      if (lower != cp) {
        bits |= B::kLowercases;
        lowercases[cp] = std::u32string(1, lower);
      }
    }
    flat[cp] = bits;
  }

  namespace ov = unicode_overrides;
  ApplyBoolOverrides(ov::kControl, B::kControl, flat);
  ApplyBoolOverrides(ov::kBertWhitespace, B::kBertWhitespace, flat);
  ApplyBoolOverrides(ov::kWhiteSpace, B::kWhiteSpace, flat);
  ApplyBoolOverrides(ov::kPunctuation, B::kPunctuation, flat);
  ApplyBoolOverrides(ov::kChinese, B::kChinese, flat);
  ApplyBoolOverrides(ov::kNonspacingMark, B::kNonspacingMark, flat);
  for (const auto& r : ov::kCombiningClass) {
    for (char32_t cp = r.first; cp <= r.last; ++cp) {
      flat[cp] = (flat[cp] & ~0xFF00u) | (uint32_t{r.ccc} << 8);
    }
  }
  ApplyMappingOverrides(ov::kDecomposition, B::kDecomposes, flat, decompositions);
  ApplyMappingOverrides(ov::kLowercase, B::kLowercases, flat, lowercases);

  // Side pool for the mappings; extras_[0] stays empty and means "no extra".
  extras_.emplace_back();
  for (char32_t cp = 0; cp < kCodePointLimit; ++cp) {
    const auto d = decompositions.find(cp);
    const auto l = lowercases.find(cp);
    if (d == decompositions.end() && l == lowercases.end()) continue;
    Extra e;
    if (d != decompositions.end()) {
      e.decomp_offset = static_cast<uint32_t>(pool_.size());
      e.decomp_length = static_cast<uint8_t>(d->second.size());
      pool_.insert(pool_.end(), d->second.begin(), d->second.end());
    }
    if (l != lowercases.end()) {
      e.lower_offset = static_cast<uint32_t>(pool_.size());
      e.lower_length = static_cast<uint8_t>(l->second.size());
      pool_.insert(pool_.end(), l->second.begin(), l->second.end());
    }
    if (extras_.size() > 0xFFFF) throw std::logic_error("UnicodeProps: extra index overflow");
    flat[cp] = (flat[cp] & 0xFFFFu) | (static_cast<uint32_t>(extras_.size()) << 16);
    extras_.push_back(e);
  }

  // Two-stage table: identical 256-entry blocks (most of the unassigned planes) share storage.
  std::unordered_map<std::string, uint16_t> seen;
  stage1_.resize(kCodePointLimit / kBlockSize);
  for (size_t block = 0; block < stage1_.size(); ++block) {
    const uint32_t* begin = flat.data() + block * kBlockSize;
    std::string key(reinterpret_cast<const char*>(begin), kBlockSize * sizeof(uint32_t));
    auto [it, inserted] =
        seen.try_emplace(std::move(key), static_cast<uint16_t>(stage2_.size() / kBlockSize));
    if (inserted) stage2_.insert(stage2_.end(), begin, begin + kBlockSize);
    stage1_[block] = it->second;
  }
}

void UnicodeProps::AppendDecomposition(char32_t cp, CodePointInfo info,
                                       std::vector<char32_t>& out) const {
  const Extra& e = extras_[info.extra_index()];
  if (e.decomp_length > 0) {
    out.insert(out.end(), pool_.begin() + e.decomp_offset,
               pool_.begin() + e.decomp_offset + e.decomp_length);
    return;
  }
  const char32_t s = cp - kHangulSBase;
  assert(s < kHangulSCount);
  out.push_back(kHangulLBase + s / kHangulNCount);
  out.push_back(kHangulVBase + (s % kHangulNCount) / kHangulTCount);
  if (s % kHangulTCount != 0) out.push_back(kHangulTBase + s % kHangulTCount);
}

}  // namespace tailcut
