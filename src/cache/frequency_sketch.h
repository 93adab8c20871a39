// FrequencySketch: the popularity estimate behind the L1 cache's W-TinyLFU admission
// policy. A count-min sketch of 4-bit counters (Caffeine's design, after Einziger et al.,
// "TinyLFU: A Highly Efficient Cache Admission Policy"):
//  - Four counters per key; the estimate is their minimum, so it never underestimates a
//    key's count since the last aging step (collisions can only add).
//  - Counters saturate at 15: admission only has to tell "seen a few times" from "seen
//    once", and 4 bits keep the table at 8 bytes per expected entry.
//  - Aging: after `10 x expected_entries` increments every counter is halved, so the sketch
//    follows a shifting workload instead of remembering yesterday's hot keys forever.
//  - The four counters of a key share one 64-byte block (Caffeine 3's layout), so an
//    increment or estimate touches one cache line.
//
// The caller passes a well-mixed 64-bit hash (L1Cache mixes the CacheKey once); the sketch
// does not hash again beyond deriving counter positions from it.
//
// Thread-safety: none; each L1Cache shard owns one and uses it under the shard's mutex.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tailcut {

class FrequencySketch {
 public:
  // Sized for `expected_entries` distinct resident keys (at least one 64-byte block).
  explicit FrequencySketch(size_t expected_entries);

  // Estimated accesses of `hash` since the last aging step(s), 0..15.
  int Frequency(uint64_t hash) const;
  // Counts one access; may trigger aging (O(table) once every sample_size() increments,
  // i.e. O(1) amortised per increment).
  void Increment(uint64_t hash);
  // Forgets everything (counters and the aging clock).
  void Clear();

  // Increments (that changed a counter) after which the counters are halved.
  uint64_t sample_size() const { return sample_size_; }
  // Increments counted toward the next aging step.
  uint64_t additions() const { return additions_; }
  // How many times the counters have been halved.
  uint64_t resets() const { return resets_; }
  size_t table_bytes() const { return table_.size() * sizeof(uint64_t); }

 private:
  void Reset();

  std::vector<uint64_t> table_;  // Blocks of 8 words; each word holds 16 4-bit counters.
  uint64_t block_mask_ = 0;      // Number of blocks - 1 (a power of two).
  uint64_t sample_size_ = 0;
  uint64_t additions_ = 0;
  uint64_t resets_ = 0;
};

}  // namespace tailcut
