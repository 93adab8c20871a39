#include "config/suggestions.h"

#include <algorithm>

#include "config/setting_names.h"
#include "config/settings.h"
#include "config/value_parsing.h"

namespace tailcut::config_internal {

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string Suggestion(std::string_view name, std::string_view leaf,
                       const std::vector<Candidate>& candidates) {
  const std::string lower = Lower(name);
  const std::string lower_leaf = Lower(leaf);
  const Candidate* best = nullptr;
  size_t best_distance = std::max<size_t>(2, name.size() / 4) + 1;
  for (const auto& c : candidates) {
    const size_t d = Lower(c.leaf) == lower_leaf ? 0 : EditDistance(lower, Lower(c.name));
    if (d < best_distance) {
      best = &c;
      best_distance = d;
    }
  }
  return best == nullptr ? "" : " (did you mean " + best->name + "?)";
}

std::vector<Candidate> KeyCandidates() {
  std::vector<Candidate> out;
  for (const auto& [section, intro] : Sections()) out.push_back({section, section});
  for (const auto& s : Settings()) out.push_back({s.key, std::string(AfterFirst(s.key, '.'))});
  return out;
}

}  // namespace tailcut::config_internal
