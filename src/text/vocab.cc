#include "text/vocab.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unordered_map>

namespace tailcut {
namespace {

uint64_t Mix(uint64_t x) {
  // splitmix64's finaliser: cheap and good enough avalanche for short keys.
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}

// True for the characters Rust's str::trim_end removes that can appear in vocab.txt lines.
bool IsTrailingSpace(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

}  // namespace

uint64_t VocabMap::Hash(std::string_view s) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ s.size();
  const char* p = s.data();
  size_t n = s.size();
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    h = Mix(h ^ v);
    p += 8;
    n -= 8;
  }
  if (n > 0) {
    uint64_t v = 0;
    std::memcpy(&v, p, n);
    h = Mix(h ^ v ^ (uint64_t{n} << 56));
  }
  return Mix(h);
}

VocabMap VocabMap::Build(const VocabEntries& entries) {
  // Deduplicate first (last one wins) so the table holds each key once.
  std::unordered_map<std::string_view, size_t> last;
  last.reserve(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) last[entries[i].first] = i;

  VocabMap map;
  const size_t capacity = std::bit_ceil(std::max<size_t>(16, last.size() * 2));  // Load <= 0.5.
  map.slots_.resize(capacity);
  map.mask_ = capacity - 1;
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto& [token, id] = entries[i];
    if (last[token] != i) continue;
    const uint64_t h = Hash(token);
    size_t slot = h & map.mask_;
    while (map.slots_[slot].tag != 0) slot = (slot + 1) & map.mask_;
    map.slots_[slot] = {static_cast<uint32_t>(h >> 32) | 1u, static_cast<uint32_t>(token.size()),
                        static_cast<uint32_t>(map.arena_.size()), static_cast<int32_t>(id)};
    map.arena_.append(token);
    map.max_key_length_ = std::max(map.max_key_length_, token.size());
    ++map.size_;
  }
  return map;
}

Result<VocabEntries> ReadVocabTxt(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return Status::InvalidArgument("vocab file '" + path + "' is a directory");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("cannot open vocab file '" + path + "'");
  VocabEntries entries;
  std::string line;
  while (std::getline(in, line)) {
    while (!line.empty() && IsTrailingSpace(line.back())) line.pop_back();
    const auto id = static_cast<int64_t>(entries.size());
    entries.emplace_back(std::move(line), id);
  }
  if (in.bad()) return Status::Internal("error reading vocab file '" + path + "'");
  if (entries.empty()) return Status::InvalidArgument("vocab file '" + path + "' is empty");
  return entries;
}

}  // namespace tailcut
