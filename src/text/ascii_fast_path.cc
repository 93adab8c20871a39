#include "text/ascii_fast_path.h"

#include <string>

namespace tailcut {

Result<AsciiFastPath> AsciiFastPath::Build(const BertNormalizer& normalizer) {
  using B = CodePointInfo::Bit;
  const UnicodeProps& props = UnicodeProps::Get();
  AsciiFastPath path;
  for (char32_t c = 0; c < 128; ++c) {
    const std::vector<char32_t> normalized = normalizer.NormalizeCodePoint(c);
    Action& a = path.actions_[c];
    if (normalized.empty()) {
      a.kind = Kind::kDrop;
      continue;
    }
    if (normalized.size() != 1 || normalized[0] >= 128) {
      return Status::Internal("AsciiFastPath: ASCII character " +
                              std::to_string(static_cast<unsigned>(c)) +
                              " does not normalize to one ASCII character");
    }
    const CodePointInfo info = props.Lookup(normalized[0]);
    a.ch = static_cast<char>(normalized[0]);
    if (info.Has(B::kWhiteSpace)) {
      a.kind = Kind::kSplit;
    } else if (info.Has(B::kPunctuation)) {
      a.kind = Kind::kPunct;
    } else {
      a.kind = Kind::kChar;
    }
  }
  return path;
}

}  // namespace tailcut
