// Tests for src/config/suggestions.h: edit distance, which candidate is suggested for a typo
// and when none is.
#include "config/suggestions.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tailcut::config_internal {
namespace {

TEST(EditDistanceTest, Levenshtein) {
  EXPECT_EQ(EditDistance("", ""), 0u);
  EXPECT_EQ(EditDistance("", "abc"), 3u);
  EXPECT_EQ(EditDistance("abc", ""), 3u);
  EXPECT_EQ(EditDistance("port", "port"), 0u);
  EXPECT_EQ(EditDistance("prot", "port"), 2u);  // A transposition is two edits.
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
  EXPECT_EQ(EditDistance("server", "sever"), 1u);
  EXPECT_EQ(EditDistance("a", "A"), 1u);  // Case-sensitive; Suggestion() lower-cases first.
}

const std::vector<Candidate> kCandidates = {
    {"server", "server"},
    {"server.port", "port"},
    {"server.host", "host"},
    {"server.max_body_bytes", "max_body_bytes"},
    {"batching.max_batch_size", "max_batch_size"},
};

TEST(SuggestionTest, NearestSpelling) {
  EXPECT_EQ(Suggestion("server.prot", "prot", kCandidates), " (did you mean server.port?)");
  EXPECT_EQ(Suggestion("sever", "sever", kCandidates), " (did you mean server?)");
  EXPECT_EQ(Suggestion("SERVER.PROT", "PROT", kCandidates), " (did you mean server.port?)");
}

TEST(SuggestionTest, SameLeafInAnotherSectionBeatsACloserSpelling) {
  // "server.max_body_bytes" is nearer by spelling; the leaf names the batching setting.
  EXPECT_EQ(Suggestion("server.max_batch_size", "max_batch_size", kCandidates),
            " (did you mean batching.max_batch_size?)");
  EXPECT_EQ(Suggestion("cache.PORT", "PORT", kCandidates), " (did you mean server.port?)");
}

TEST(SuggestionTest, NothingWhenNoneIsNear) {
  EXPECT_EQ(Suggestion("telemetry", "telemetry", kCandidates), "");
  EXPECT_EQ(Suggestion("x", "x", {}), "");
}

TEST(SuggestionTest, ToleranceGrowsWithTheLength) {
  // Up to max(2, length / 4) edits.
  const std::vector<Candidate> one = {{"abcdefgh", "-"}};
  EXPECT_EQ(Suggestion("abcdefXY", "", one), " (did you mean abcdefgh?)");  // 2 edits.
  EXPECT_EQ(Suggestion("abcdeXYZ", "", one), "");                           // 3 edits.
  const std::vector<Candidate> long_one = {{"abcdefghijklmnop", "-"}};      // 16 chars: 4.
  EXPECT_EQ(Suggestion("abcdefghijklWXYZ", "", long_one), " (did you mean abcdefghijklmnop?)");
  EXPECT_EQ(Suggestion("abcdefghijkVWXYZ", "", long_one), "");
}

TEST(SuggestionTest, FirstOfEquallyNearCandidatesWins) {
  const std::vector<Candidate> two = {{"abcx", "-"}, {"abcy", "-"}};
  EXPECT_EQ(Suggestion("abcz", "", two), " (did you mean abcx?)");
}

TEST(SuggestionTest, KeyCandidatesHoldSectionsAndKeysWithTheirLeaves) {
  const std::vector<Candidate> all = KeyCandidates();
  bool section = false;
  bool key = false;
  for (const auto& c : all) {
    section |= c.name == "server" && c.leaf == "server";
    key |= c.name == "batching.max_batch_size" && c.leaf == "max_batch_size";
  }
  EXPECT_TRUE(section);
  EXPECT_TRUE(key);
}

}  // namespace
}  // namespace tailcut::config_internal
