#include "text/bert_normalizer.h"

#include <algorithm>

#include "text/utf8.h"

namespace tailcut {
namespace {

using B = CodePointInfo::Bit;

// Canonical ordering (Unicode section 3.11): within each run of characters whose combining
// class is non-zero, a stable sort by combining class. Runs are short (a few marks), so an
// insertion sort is the right tool.
void CanonicalOrder(std::vector<char32_t>& cps, const UnicodeProps& props) {
  const size_t n = cps.size();
  size_t i = 0;
  while (i < n) {
    if (props.Lookup(cps[i]).combining_class() == 0) {
      ++i;
      continue;
    }
    size_t end = i + 1;
    while (end < n && props.Lookup(cps[end]).combining_class() != 0) ++end;
    if (end - i > 1) {
      std::stable_sort(cps.begin() + static_cast<ptrdiff_t>(i),
                       cps.begin() + static_cast<ptrdiff_t>(end), [&props](char32_t a, char32_t b) {
                         return props.Lookup(a).combining_class() <
                                props.Lookup(b).combining_class();
                       });
    }
    i = end;
  }
}

}  // namespace

BertNormalizer::BertNormalizer(const BertNormalizerOptions& options)
    : options_(options), props_(UnicodeProps::Get()) {}

void BertNormalizer::Normalize(std::string_view text, std::vector<char32_t>& out,
                               std::vector<char32_t>& scratch) const {
  // Steps 1 and 2 in one pass; each only looks at one code point.
  std::vector<char32_t>& stage1 = options_.strip_accents ? scratch : out;
  stage1.clear();
  for (size_t i = 0; i < text.size();) {
    char32_t cp = DecodeValidUtf8(text, &i);
    const CodePointInfo info = props_.Lookup(cp);
    if (options_.clean_text) {
      if (cp == 0 || cp == kReplacementChar || info.Has(B::kControl)) continue;
      if (info.Has(B::kBertWhitespace)) cp = ' ';
    }
    if (options_.handle_chinese_chars && info.Has(B::kChinese) && cp != ' ') {
      stage1.push_back(' ');
      stage1.push_back(cp);
      stage1.push_back(' ');
    } else {
      stage1.push_back(cp);
    }
  }
  if (options_.strip_accents) StripAccents(stage1, out);

  // Step 4 in place, except for the rare expansions (U+0130 -> i U+0307).
  if (options_.lowercase) {
    size_t i = 0;
    for (; i < out.size(); ++i) {
      const CodePointInfo info = props_.Lookup(out[i]);
      if (!info.Has(B::kLowercases)) continue;
      const std::u32string_view lower = props_.Lowercase(info);
      if (lower.size() == 1) {
        out[i] = lower[0];
        continue;
      }
      out[i] = lower[0];
      out.insert(out.begin() + static_cast<ptrdiff_t>(i) + 1, lower.begin() + 1, lower.end());
      i += lower.size() - 1;
    }
  }
}

void BertNormalizer::StripAccents(const std::vector<char32_t>& in,
                                  std::vector<char32_t>& out) const {
  out.clear();
  bool needs_ordering = false;
  char32_t previous_class = 0;
  for (const char32_t cp : in) {
    const CodePointInfo info = props_.Lookup(cp);
    if (!info.Has(B::kDecomposes)) {
      // Reordering is only needed when a mark follows one of a higher class.
      const char32_t cls = info.combining_class();
      if (cls != 0 && previous_class > cls) needs_ordering = true;
      previous_class = cls;
      out.push_back(cp);
      continue;
    }
    const size_t first = out.size();
    props_.AppendDecomposition(cp, info, out);
    for (size_t k = first; k < out.size(); ++k) {
      const char32_t cls = props_.Lookup(out[k]).combining_class();
      if (cls != 0 && previous_class > cls) needs_ordering = true;
      previous_class = cls;
    }
  }
  if (needs_ordering) CanonicalOrder(out, props_);
  std::erase_if(out, [this](char32_t cp) { return props_.Lookup(cp).Has(B::kNonspacingMark); });
}

std::vector<char32_t> BertNormalizer::NormalizeCodePoint(char32_t cp) const {
  std::string utf8;
  AppendUtf8(cp, utf8);
  std::vector<char32_t> out;
  std::vector<char32_t> scratch;
  Normalize(utf8, out, scratch);
  return out;
}

}  // namespace tailcut
