#include "cache/frequency_sketch.h"

#include <algorithm>
#include <bit>

namespace tailcut {
namespace {

constexpr uint64_t kResetMask = 0x7777777777777777ull;  // Drops the bit shifted into a nibble.
constexpr uint64_t kOneMask = 0x1111111111111111ull;    // The low bit of every nibble.
constexpr size_t kWordsPerBlock = 8;                    // 64 bytes: one cache line.

// Counter positions come from bits independent of the block index (which uses the low bits):
// one more multiply-xorshift round over the whole hash.
uint32_t CounterHash(uint64_t hash) {
  uint64_t h = (hash ^ (hash >> 29)) * 0xbf58476d1ce4e5b9ull;
  return static_cast<uint32_t>(h >> 32);
}

}  // namespace

FrequencySketch::FrequencySketch(size_t expected_entries) {
  const size_t entries = std::max<size_t>(expected_entries, 1);
  // One word (16 counters) per expected entry, as Caffeine: with 4 counters per key that is
  // 4 counters per slot on average, enough to keep collision noise below the
  // one-vs-several distinction admission cares about.
  const size_t words = std::max(std::bit_ceil(entries), kWordsPerBlock);
  table_.assign(words, 0);
  block_mask_ = words / kWordsPerBlock - 1;
  sample_size_ = 10 * static_cast<uint64_t>(entries);
}

int FrequencySketch::Frequency(uint64_t hash) const {
  const size_t block = static_cast<size_t>(hash & block_mask_) * kWordsPerBlock;
  const uint32_t counter_hash = CounterHash(hash);
  int frequency = 15;
  for (int i = 0; i < 4; ++i) {
    // Counter i lives in word 2i or 2i+1 of the block, at one of its 16 nibbles.
    const uint32_t h = counter_hash >> (i * 8);
    const size_t word = block + static_cast<size_t>(i) * 2 + (h & 1);
    const int nibble = static_cast<int>((h >> 1) & 15);
    const int count = static_cast<int>((table_[word] >> (nibble * 4)) & 0xf);
    frequency = std::min(frequency, count);
  }
  return frequency;
}

void FrequencySketch::Increment(uint64_t hash) {
  const size_t block = static_cast<size_t>(hash & block_mask_) * kWordsPerBlock;
  const uint32_t counter_hash = CounterHash(hash);
  bool added = false;
  for (int i = 0; i < 4; ++i) {
    const uint32_t h = counter_hash >> (i * 8);
    const size_t word = block + static_cast<size_t>(i) * 2 + (h & 1);
    const int nibble = static_cast<int>((h >> 1) & 15);
    const uint64_t mask = 0xfull << (nibble * 4);
    if ((table_[word] & mask) != mask) {  // Saturates at 15.
      table_[word] += 1ull << (nibble * 4);
      added = true;
    }
  }
  // Only increments that changed something advance the aging clock; a key already at 15
  // everywhere would otherwise age the table without adding information.
  if (added && ++additions_ >= sample_size_) Reset();
}

void FrequencySketch::Reset() {
  uint64_t odd = 0;
  for (uint64_t& word : table_) {
    odd += static_cast<uint64_t>(std::popcount(word & kOneMask));
    word = (word >> 1) & kResetMask;
  }
  // Halve the aging clock too, less the truncation error of the odd counters (each key has
  // four counters, hence / 4), so the next halving comes after a similar amount of new
  // information.
  const uint64_t correction = odd / 4;
  additions_ = additions_ > correction ? (additions_ - correction) / 2 : 0;
  ++resets_;
}

void FrequencySketch::Clear() {
  std::fill(table_.begin(), table_.end(), 0);
  additions_ = 0;
}

}  // namespace tailcut
