#include "text/added_tokens.h"

#include <algorithm>

namespace tailcut {

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens) {
  for (auto& t : tokens) {
    if (t.content.empty()) continue;
    first_byte_[static_cast<unsigned char>(t.content[0])] = true;
    tokens_.push_back(std::move(t));
  }
  std::stable_sort(tokens_.begin(), tokens_.end(), [](const AddedToken& a, const AddedToken& b) {
    return a.content.size() > b.content.size();
  });
}

const AddedToken* AddedTokenMatcher::Match(std::string_view text, size_t pos) const {
  const std::string_view rest = text.substr(pos);
  for (const AddedToken& t : tokens_) {
    if (rest.starts_with(t.content)) return &t;
  }
  return nullptr;
}

}  // namespace tailcut
