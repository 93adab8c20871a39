// Cached value encoding: how one embedding is stored as a Redis string value.
//
// Layout (16-byte header, then the payload; every integer and float little-endian):
//   offset 0   4 bytes  magic "TCE1" (tailcut embedding, format 1)
//   offset 4   uint32   element count n
//   offset 8   uint64   XXH3-64 of the payload, seeded with n
//   offset 16  n x float32 (IEEE 754) payload
//
// Why a checksum: the value comes from a shared server we do not control, and whatever
// decodes becomes an answer to a client. The length and magic checks catch truncation and
// foreign data, but not flipped bits, a buggy writer or a format change that kept the magic;
// any of those would be returned as a plausible, wrong vector. XXH3 over a 384-dim payload
// costs ~50 ns, nothing next to a ~50 us network round trip. Seeding with n binds the count
// to the payload. Non-finite values are rejected too, so a poisoned entry can't spread NaNs.
//
// The decoder takes arbitrary bytes (it is fuzzed): it checks every length before reading,
// never trusts the count for an allocation before checking it against the actual size, and
// fails with InvalidArgument naming the first defect.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace tailcut {

inline constexpr size_t kCachedEmbeddingHeaderBytes = 16;

// Encodes `values` (any values; the decoder rejects non-finite ones, so don't cache them).
std::string EncodeEmbedding(std::span<const float> values);

// Decodes bytes produced by EncodeEmbedding, requiring exactly `expected_dims` values.
Result<std::vector<float>> DecodeEmbedding(std::string_view bytes, size_t expected_dims);

}  // namespace tailcut
