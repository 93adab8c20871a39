// SemanticStore: exact and nearest lookups stay inside a partition, the TTL and the byte bound
// remove entries from the index as well as the maps, and freed index slots are reused.
#include "cache/semantic_store.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace tailcut {
namespace {

// A unit vector along `axis`, tilted towards axis+1 by `tilt` (cosine to the axis: 1/sqrt(1+t^2)).
std::vector<float> Unit(size_t dims, size_t axis, float tilt = 0) {
  std::vector<float> v(dims, 0.0f);
  v[axis % dims] = 1.0f;
  v[(axis + 1) % dims] = tilt;
  const float n = std::sqrt(1.0f + tilt * tilt);
  for (float& x : v) x /= n;
  return v;
}

SemanticEntry Entry(const std::string& id, const std::string& partition, const std::string& query,
                    std::vector<float> embedding, int64_t created_micros,
                    const std::string& answer = "answer") {
  SemanticEntry e;
  e.id = id;
  e.partition = partition;
  e.query = query;
  e.embedding = std::move(embedding);
  e.model = "m";
  e.variant = "q4_1";
  e.pieces = {{answer, 1}};
  e.finish_reason = "stop";
  e.created_micros = created_micros;
  return e;
}

class SemanticStoreTest : public ::testing::Test {
 protected:
  ManualClock clock_{1'000'000'000};
};

TEST_F(SemanticStoreTest, FindsTheNearestEntryOfItsPartitionOnly) {
  SemanticStore store({}, clock_);
  const int64_t now = clock_.NowMicros();
  ASSERT_TRUE(store.Insert(Entry("a", "p1", "capital of france", Unit(8, 0), now)));
  ASSERT_TRUE(store.Insert(Entry("b", "p1", "capital of germany", Unit(8, 3), now)));
  ASSERT_TRUE(store.Insert(Entry("c", "p2", "capital of france?", Unit(8, 0), now)));

  auto found = store.Search("p1", Unit(8, 0, 0.1f), 4, 0.5f);
  ASSERT_EQ(found.size(), 1u);  // Germany's vector is orthogonal: below the floor.
  EXPECT_EQ(found[0].entry->id, "a");
  EXPECT_NEAR(found[0].cosine, 1.0 / std::sqrt(1.01), 1e-5);

  found = store.Search("p1", Unit(8, 0, 0.1f), 4, -1.0f);
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].entry->id, "a");  // Most similar first.
  EXPECT_EQ(found[1].entry->id, "b");

  EXPECT_TRUE(store.Search("p3", Unit(8, 0), 4, 0.0f).empty());
  ASSERT_NE(store.FindExact("p2", "capital of france?"), nullptr);
  EXPECT_EQ(store.FindExact("p1", "capital of france?"), nullptr);
}

TEST_F(SemanticStoreTest, RefusesMismatchedDimensionsDuplicateIdsAndOversizedEntries) {
  SemanticStoreOptions options;
  options.capacity_bytes = 8 << 10;
  SemanticStore store(options, clock_);
  const int64_t now = clock_.NowMicros();
  ASSERT_TRUE(store.Insert(Entry("a", "p", "q", Unit(8, 0), now)));
  EXPECT_FALSE(store.Insert(Entry("b", "p", "q2", Unit(16, 0), now)));
  EXPECT_FALSE(store.Insert(Entry("a", "p", "q3", Unit(8, 1), now)));
  EXPECT_FALSE(store.Insert(Entry("c", "p", "q4", Unit(8, 1), now, std::string(16 << 10, 'x'))));
  EXPECT_EQ(store.stats().entries, 1);
}

TEST_F(SemanticStoreTest, ExpiredEntriesAreNeverReturnedAndLeaveTheIndex) {
  SemanticStoreOptions options;
  options.ttl_micros = 60'000'000;
  SemanticStore store(options, clock_);
  ASSERT_TRUE(store.Insert(Entry("a", "p", "q", Unit(8, 0), clock_.NowMicros())));
  EXPECT_EQ(store.Search("p", Unit(8, 0), 1, 0.0f).size(), 1u);
  clock_.AdvanceMicros(60'000'000);
  EXPECT_TRUE(store.Search("p", Unit(8, 0), 1, 0.0f).empty());
  EXPECT_EQ(store.FindExact("p", "q"), nullptr);
  const auto s = store.stats();
  EXPECT_EQ(s.entries, 0);
  EXPECT_EQ(s.expired, 1);
  EXPECT_EQ(s.partitions, 0);
  EXPECT_EQ(s.bytes, 0);
  // An entry already past its TTL is not stored at all.
  EXPECT_FALSE(store.Insert(Entry("b", "p", "q", Unit(8, 0), clock_.NowMicros() - 61'000'000)));
}

TEST_F(SemanticStoreTest, TheByteBoundEvictsTheLeastRecentlyUsedFromTheIndexToo) {
  const size_t one = Entry("x", "p", "q00", Unit(8, 0), 0).Bytes();
  SemanticStoreOptions options;
  options.capacity_bytes = static_cast<int64_t>(one * 3 + one / 2);  // Room for three.
  SemanticStore store(options, clock_);
  const int64_t now = clock_.NowMicros();
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(store.Insert(Entry("e" + std::to_string(i), "p", "q0" + std::to_string(i),
                                   Unit(8, static_cast<size_t>(i)), now)));
  }
  ASSERT_NE(store.FindExact("p", "q00"), nullptr);  // e0 is now the most recent; e1 the least.
  ASSERT_TRUE(store.Insert(Entry("e3", "p", "q03", Unit(8, 3), now)));
  auto s = store.stats();
  EXPECT_EQ(s.entries, 3);
  EXPECT_EQ(s.evicted, 1);
  EXPECT_LE(s.bytes, options.capacity_bytes);
  EXPECT_FALSE(store.Contains("e1"));
  // The evicted vector is gone from the index: a search right at it finds the others.
  for (const auto& c : store.Search("p", Unit(8, 1), 4, -1.0f)) EXPECT_NE(c.entry->id, "e1");
  EXPECT_EQ(store.Search("p", Unit(8, 1), 4, 0.5f).size(), 0u);
}

TEST_F(SemanticStoreTest, FreedSlotsAreReusedSoTheIndexDoesNotGrowWithTurnover) {
  SemanticStoreOptions options;
  const size_t one = Entry("x", "p", "q000", Unit(16, 0), 0).Bytes();
  options.capacity_bytes = static_cast<int64_t>(one * 10);
  SemanticStore store(options, clock_);
  const int64_t now = clock_.NowMicros();
  for (int i = 0; i < 2000; ++i) {
    char q[16];
    std::snprintf(q, sizeof(q), "q%03d", i % 1000);
    ASSERT_TRUE(store.Insert(
        Entry("e" + std::to_string(i), "p", q, Unit(16, static_cast<size_t>(i), 0.3f), now)));
  }
  const auto s = store.stats();
  EXPECT_LE(s.entries, 10);
  EXPECT_EQ(s.evicted, 2000 - s.entries);
  EXPECT_LE(s.index_slots, 11);  // Not 2,000: evicted entries' slots were reused.
  // Every live entry is found by its own vector, and nothing evicted ever is.
  const auto found = store.Search("p", Unit(16, 1999, 0.3f), 1, 0.99f);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].entry->id, "e1999");
}

TEST_F(SemanticStoreTest, TheSameQueryReplacesItsOlderAnswer) {
  SemanticStore store({}, clock_);
  const int64_t now = clock_.NowMicros();
  ASSERT_TRUE(store.Insert(Entry("a", "p", "q", Unit(8, 0), now, "old")));
  ASSERT_TRUE(store.Insert(Entry("b", "p", "q", Unit(8, 0), now, "new")));
  EXPECT_EQ(store.stats().entries, 1);
  auto hit = store.FindExact("p", "q");
  ASSERT_NE(hit, nullptr);
  EXPECT_EQ(hit->pieces.at(0).text, "new");
  const auto found = store.Search("p", Unit(8, 0), 4, 0.0f);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].entry->id, "b");
  EXPECT_EQ(store.Clear(), 1);
  EXPECT_EQ(store.stats().entries, 0);
}

TEST_F(SemanticStoreTest, AnEntryWithoutAnEmbeddingIsFoundByItsTextOnly) {
  // What the exact policy stores: no embedding, so no point in the index.
  SemanticStore store({}, clock_);
  const int64_t now = clock_.NowMicros();
  ASSERT_TRUE(store.Insert(Entry("x", "p1", "capital of france", {}, now)));
  EXPECT_EQ(store.FindExact("p1", "capital of france")->id, "x");
  EXPECT_TRUE(store.Search("p1", Unit(8, 0), 4, -1.0f).empty());
  EXPECT_EQ(store.stats().index_slots, 0);
  // Embedded entries beside it are searched as usual, and it leaves like any other.
  ASSERT_TRUE(store.Insert(Entry("y", "p1", "capital of germany", Unit(8, 3), now)));
  auto found = store.Search("p1", Unit(8, 3), 4, -1.0f);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].entry->id, "y");
  ASSERT_TRUE(store.Insert(Entry("z", "p1", "capital of france", {}, now, "newer")));
  EXPECT_EQ(store.FindExact("p1", "capital of france")->id, "z");
  EXPECT_EQ(store.stats().entries, 2);
  EXPECT_EQ(store.Clear(), 2);
}

}  // namespace
}  // namespace tailcut
