#include "cache/cached_value.h"

#include <xxhash.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace tailcut {
namespace {

static_assert(std::numeric_limits<float>::is_iec559 && sizeof(float) == 4,
              "the payload is IEEE 754 binary32");
static_assert(std::endian::native == std::endian::little || std::endian::native == std::endian::big,
              "mixed-endian hosts are not supported");

constexpr char kMagic[4] = {'T', 'C', 'E', '1'};
constexpr bool kLittleEndianHost = std::endian::native == std::endian::little;

// Stored-format (little-endian) <-> host helpers; on little-endian hosts they are plain copies.
void PutU32(char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
void PutU64(char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t{static_cast<unsigned char>(p[i])} << (8 * i);
  return v;
}
uint64_t GetU64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t{static_cast<unsigned char>(p[i])} << (8 * i);
  return v;
}

// The checksum covers the payload as stored (little-endian bytes), so it is host-independent.
uint64_t Checksum(const char* payload, size_t bytes, uint32_t count) {
  return XXH3_64bits_withSeed(payload, bytes, count);
}

}  // namespace

std::string EncodeEmbedding(std::span<const float> values) {
  // A count beyond uint32 would be a multi-GiB embedding; no model produces one.
  const auto count = static_cast<uint32_t>(values.size());
  const size_t payload_bytes = size_t{count} * sizeof(float);
  std::string out(kCachedEmbeddingHeaderBytes + payload_bytes, '\0');
  char* payload = out.data() + kCachedEmbeddingHeaderBytes;
  if constexpr (kLittleEndianHost) {
    if (payload_bytes > 0) std::memcpy(payload, values.data(), payload_bytes);
  } else {
    for (uint32_t i = 0; i < count; ++i) {
      PutU32(payload + 4 * i, std::bit_cast<uint32_t>(values[i]));
    }
  }
  std::memcpy(out.data(), kMagic, sizeof(kMagic));
  PutU32(out.data() + 4, count);
  PutU64(out.data() + 8, Checksum(payload, payload_bytes, count));
  return out;
}

Result<std::vector<float>> DecodeEmbedding(std::string_view bytes, size_t expected_dims) {
  if (bytes.size() < kCachedEmbeddingHeaderBytes) {
    return Status::InvalidArgument("cached embedding: truncated header (" +
                                   std::to_string(bytes.size()) + " bytes)");
  }
  if (std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    return Status::InvalidArgument("cached embedding: bad magic");
  }
  const uint32_t count = GetU32(bytes.data() + 4);
  if (count != expected_dims) {
    return Status::InvalidArgument("cached embedding: " + std::to_string(count) +
                                   " values, expected " + std::to_string(expected_dims));
  }
  // In 64 bits: count < 2^32, so this cannot overflow, and it is compared before any use.
  const uint64_t payload_bytes = uint64_t{count} * sizeof(float);
  if (bytes.size() - kCachedEmbeddingHeaderBytes != payload_bytes) {
    return Status::InvalidArgument("cached embedding: " + std::to_string(bytes.size()) +
                                   " bytes, expected " +
                                   std::to_string(kCachedEmbeddingHeaderBytes + payload_bytes));
  }
  const char* payload = bytes.data() + kCachedEmbeddingHeaderBytes;
  if (GetU64(bytes.data() + 8) != Checksum(payload, payload_bytes, count)) {
    return Status::InvalidArgument("cached embedding: checksum mismatch");
  }
  std::vector<float> values(count);
  if constexpr (kLittleEndianHost) {
    if (payload_bytes > 0) std::memcpy(values.data(), payload, payload_bytes);
  } else {
    for (uint32_t i = 0; i < count; ++i) values[i] = std::bit_cast<float>(GetU32(payload + 4 * i));
  }
  for (uint32_t i = 0; i < count; ++i) {
    if (!std::isfinite(values[i])) {
      return Status::InvalidArgument("cached embedding: non-finite value at index " +
                                     std::to_string(i));
    }
  }
  return values;
}

}  // namespace tailcut
