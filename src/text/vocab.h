// Vocab: the token -> id map of a WordPiece model, and reading BERT's vocab.txt.
//
// VocabMap is a flat open-addressing hash table tuned for the tokenizer's hot loop: lookups take
// a std::string_view (no temporary std::string per probe), keys live in one contiguous arena,
// and each slot carries a hash tag so most mismatches never touch the key bytes.
//
// Thread-safety: VocabMap is immutable after Build(); Find() is const and safe to call from any
// number of threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace tailcut {

using VocabEntries = std::vector<std::pair<std::string, int64_t>>;

class VocabMap {
 public:
  static constexpr int64_t kNotFound = -1;

  VocabMap() = default;

  // Builds the map; a later duplicate key overrides an earlier one (as HF does for vocab.txt).
  // Ids must be in [0, 2^31).
  static VocabMap Build(const VocabEntries& entries);

  // The id of `token`, or kNotFound.
  int64_t Find(std::string_view token) const {
    if (slots_.empty() || token.size() > max_key_length_) return kNotFound;
    const uint64_t h = Hash(token);
    const uint32_t tag = static_cast<uint32_t>(h >> 32) | 1u;  // 0 marks an empty slot.
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& slot = slots_[i];
      if (slot.tag == 0) return kNotFound;
      if (slot.tag == tag && slot.length == token.size() &&
          std::memcmp(arena_.data() + slot.offset, token.data(), token.size()) == 0) {
        return slot.id;
      }
    }
  }

  size_t size() const { return size_; }
  // Longest key in bytes: WordPiece never needs to try a longer substring.
  size_t max_key_length() const { return max_key_length_; }

  static uint64_t Hash(std::string_view s);

 private:
  // Everything a probe needs in one 16-byte slot: one cache miss for the slot, one for the
  // key bytes (skipped when the tag or length differ).
  struct Slot {
    uint32_t tag = 0;  // High hash bits | 1; 0 = empty.
    uint32_t length = 0;
    uint32_t offset = 0;  // Key bytes in arena_.
    int32_t id = 0;
  };

  std::vector<Slot> slots_;
  size_t size_ = 0;
  std::string arena_;
  size_t mask_ = 0;
  size_t max_key_length_ = 0;
};

// Reads a BERT vocab.txt: one token per line, id = line number (from 0), trailing whitespace
// trimmed as HF's WordPiece::read_file does. Errors name the file.
Result<VocabEntries> ReadVocabTxt(const std::string& path);

}  // namespace tailcut
