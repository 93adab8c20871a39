#include "cache/frequency_sketch.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

namespace tailcut {
namespace {

// The sketch expects well-mixed hashes; splitmix64 of a counter gives them.
uint64_t H(uint64_t i) {
  uint64_t z = i + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

TEST(FrequencySketchTest, CountsAndSaturatesAtFifteen) {
  FrequencySketch sketch(1024);
  EXPECT_EQ(sketch.Frequency(H(1)), 0);
  for (int i = 1; i <= 20; ++i) {
    sketch.Increment(H(1));
    EXPECT_EQ(sketch.Frequency(H(1)), std::min(i, 15));
  }
}

TEST(FrequencySketchTest, NeverUnderestimatesBeforeAging) {
  // Count-min: each estimate is a minimum over counters that only collisions can inflate.
  FrequencySketch sketch(512);
  std::mt19937_64 rng(7);
  std::map<uint64_t, int> truth;
  // 3000 increments stay below the aging threshold (10 x 512).
  for (int i = 0; i < 3000; ++i) {
    const uint64_t key = rng() % 1000;
    sketch.Increment(H(key));
    ++truth[key];
  }
  ASSERT_EQ(sketch.resets(), 0u);
  int exact = 0;
  for (const auto& [key, count] : truth) {
    const int estimate = sketch.Frequency(H(key));
    EXPECT_GE(estimate, std::min(count, 15)) << key;
    if (estimate == std::min(count, 15)) ++exact;
  }
  // Sized at one word per expected entry, collisions are the exception.
  EXPECT_GT(exact, static_cast<int>(truth.size()) * 9 / 10);
}

TEST(FrequencySketchTest, AgingHalvesCounters) {
  FrequencySketch sketch(64);
  EXPECT_EQ(sketch.sample_size(), 640u);
  for (int i = 0; i < 15; ++i) sketch.Increment(H(1));
  for (int i = 0; i < 4; ++i) sketch.Increment(H(2));
  sketch.Increment(H(3));
  ASSERT_EQ(sketch.Frequency(H(1)), 15);
  // Distinct keys until the table ages exactly once.
  uint64_t next = 1000;
  while (sketch.resets() == 0) sketch.Increment(H(next++));
  EXPECT_EQ(sketch.Frequency(H(1)), 7);  // 15 / 2
  // 4 / 2, plus at most what colliding keys added before the halving.
  EXPECT_GE(sketch.Frequency(H(2)), 2);
  EXPECT_LE(sketch.Frequency(H(2)), 3);
  EXPECT_LE(sketch.Frequency(H(3)), 1);  // A one-hit wonder is (nearly) forgotten.
  // The aging clock restarts at about half, so the next halving needs fresh information.
  EXPECT_LT(sketch.additions(), sketch.sample_size() / 2 + 1);

  // Without further accesses, repeated aging forgets the hot key too (down to the collision
  // noise of this deliberately small, overfilled table).
  while (sketch.resets() < 4) sketch.Increment(H(next++));
  EXPECT_LE(sketch.Frequency(H(1)), 3);
}

TEST(FrequencySketchTest, ClearForgetsEverything) {
  FrequencySketch sketch(64);
  for (int i = 0; i < 5; ++i) sketch.Increment(H(9));
  sketch.Clear();
  EXPECT_EQ(sketch.Frequency(H(9)), 0);
  EXPECT_EQ(sketch.additions(), 0u);
}

TEST(FrequencySketchTest, SmallestTableIsOneBlock) {
  FrequencySketch sketch(0);
  EXPECT_EQ(sketch.table_bytes(), 64u);
  sketch.Increment(H(1));
  EXPECT_EQ(sketch.Frequency(H(1)), 1);
}

}  // namespace
}  // namespace tailcut
