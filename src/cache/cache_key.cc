#include "cache/cache_key.h"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack: no allocation per key.
#include <xxhash.h>

#include <charconv>
#include <cstdio>

namespace tailcut {

std::string CacheKey::ToHex() const {
  char buf[33];
  std::snprintf(buf, sizeof(buf), "%016llx%016llx", static_cast<unsigned long long>(high),
                static_cast<unsigned long long>(low));
  return buf;
}

std::optional<CacheKey> CacheKey::FromHex(std::string_view hex) {
  if (hex.size() != 32) return std::nullopt;
  CacheKey k;
  for (auto [part, out] : {std::pair{hex.substr(0, 16), &k.high}, {hex.substr(16), &k.low}}) {
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), *out, 16);
    if (ec != std::errc() || end != part.data() + part.size()) return std::nullopt;
  }
  return k;
}

CacheKey MakeTextCacheKey(const CacheNamespace& ns, std::span<const int64_t> token_ids) {
  XXH3_state_t state;
  XXH3_128bits_reset(&state);
  // Each string is followed by its NUL so that ("ab","c") and ("a","bc") differ.
  const char kind[] = "text-embedding";
  XXH3_128bits_update(&state, kind, sizeof(kind));
  for (const std::string* s : {&ns.model, &ns.variant, &ns.file_digest, &ns.readout}) {
    XXH3_128bits_update(&state, s->c_str(), s->size() + 1);
  }
  const unsigned char normalize = ns.normalize ? 1 : 0;
  XXH3_128bits_update(&state, &normalize, 1);
  const uint64_t count = token_ids.size();
  XXH3_128bits_update(&state, &count, sizeof(count));
  XXH3_128bits_update(&state, token_ids.data(), token_ids.size_bytes());
  const XXH128_hash_t h = XXH3_128bits_digest(&state);
  return {h.high64, h.low64};
}

}  // namespace tailcut
