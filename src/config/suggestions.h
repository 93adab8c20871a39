// "Did you mean" for unknown YAML keys and TAILCUT_<SECTION>_* variables: the known name
// nearest to a typo by edit distance, or the setting of the same name in another section.
// Internal to src/config.
//
// Thread-safety: pure functions (KeyCandidates() reads the immutable settings table).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace tailcut::config_internal {

// Levenshtein distance (insertions, deletions, substitutions), case-sensitive.
size_t EditDistance(std::string_view a, std::string_view b);

// A name a typo may have been aimed at: `leaf` is the part after the section, so that a
// setting put in the wrong section ("server.max_batch_size") is recognised.
struct Candidate {
  std::string name;
  std::string leaf;
};

// " (did you mean X?)" for the candidate nearest to the unknown `name`, or "" when none is
// near (within max(2, length / 4) edits, case-insensitively). An exact leaf match (the
// setting exists, in another section) beats any spelling.
std::string Suggestion(std::string_view name, std::string_view leaf,
                       const std::vector<Candidate>& candidates);

// Keys and section names, for unknown YAML keys at any depth.
std::vector<Candidate> KeyCandidates();

}  // namespace tailcut::config_internal
