// CacheKey: the identity of one cached embedding. It is a 128-bit xxh3 digest over
// everything that can change the output:
//   - the model's name and the digest of the exact ONNX file of the precision variant that
//     computes it (so a reload with new weights, or a precision switch, can never return an
//     entry another file computed),
//   - how the vector is read out of the graph (output name and pooling from model.yaml),
//   - every request option that changes the vector (normalize),
//   - the exact model input: the token ids after the tokenizer's normalisation and
//     truncation. Two texts that tokenize identically are the same model input and share an
//     entry; anything else differs.
// 128 bits make an accidental collision (a wrong answer) practically impossible
// (~2^-64 at 2^32 entries).
//
// Thread-safety: value type; the builder functions are pure.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace tailcut {

struct CacheKey {
  uint64_t high = 0;
  uint64_t low = 0;
  bool operator==(const CacheKey&) const = default;
  // 32 hex digits, the Redis key suffix.
  std::string ToHex() const;
  // The inverse of ToHex(): exactly 32 hex digits, else nullopt.
  static std::optional<CacheKey> FromHex(std::string_view hex);
};

struct CacheKeyHash {
  size_t operator()(const CacheKey& k) const { return static_cast<size_t>(k.low ^ (k.high * 0x9E3779B97F4A7C15ull)); }
};

// The part of a key shared by every input of one request: model, variant file, options.
struct CacheNamespace {
  std::string model;
  std::string variant;
  std::string file_digest;
  // How the embedding is read out of the graph (output tensor, pooling): the same file can
  // give different vectors under another model.yaml.
  std::string readout;
  bool normalize = true;
};

CacheKey MakeTextCacheKey(const CacheNamespace& ns, std::span<const int64_t> token_ids);

}  // namespace tailcut
