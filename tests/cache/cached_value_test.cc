#include "cache/cached_value.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace tailcut {
namespace {

std::vector<float> Sample(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::sin(static_cast<float>(i)) * 0.25f - 1e-30f * i;
  return v;
}

void ExpectInvalid(std::string_view bytes, size_t dims, std::string_view message_part) {
  auto r = DecodeEmbedding(bytes, dims);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find(message_part), std::string::npos) << r.status().message();
}

TEST(CachedValueTest, RoundTripIsBitExact) {
  for (size_t n : {0u, 1u, 3u, 384u, 1536u}) {
    auto v = Sample(n);
    if (n > 2) {
      v[1] = -0.0f;
      v[2] = std::numeric_limits<float>::denorm_min();
    }
    const std::string bytes = EncodeEmbedding(v);
    ASSERT_EQ(bytes.size(), kCachedEmbeddingHeaderBytes + 4 * n);
    auto r = DecodeEmbedding(bytes, n);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->size(), n);
    if (n > 0) {  // memcmp on an empty vector's null data() is undefined.
      EXPECT_EQ(std::memcmp(r->data(), v.data(), n * sizeof(float)), 0);
    }
  }
}

TEST(CachedValueTest, LayoutIsTheDocumentedLittleEndianOne) {
  const std::vector<float> v{1.0f, -2.0f};
  const std::string b = EncodeEmbedding(v);
  EXPECT_EQ(b.substr(0, 4), "TCE1");
  EXPECT_EQ(b.substr(4, 4), std::string("\x02\x00\x00\x00", 4));
  EXPECT_EQ(b.substr(16, 4), std::string("\x00\x00\x80\x3f", 4));  // 1.0f
  EXPECT_EQ(b.substr(20, 4), std::string("\x00\x00\x00\xc0", 4));  // -2.0f
}

TEST(CachedValueTest, RejectsTruncatedHeader) {
  const std::string good = EncodeEmbedding(Sample(4));
  for (size_t len = 0; len < kCachedEmbeddingHeaderBytes; ++len) {
    ExpectInvalid(std::string_view(good).substr(0, len), 4, "truncated header");
  }
}

TEST(CachedValueTest, RejectsBadMagic) {
  std::string b = EncodeEmbedding(Sample(4));
  b[3] = '2';  // A future format version is not this one.
  ExpectInvalid(b, 4, "bad magic");
  ExpectInvalid(std::string(32, '\0'), 4, "bad magic");
}

TEST(CachedValueTest, RejectsWrongCount) {
  const std::string b = EncodeEmbedding(Sample(4));
  ExpectInvalid(b, 5, "4 values, expected 5");
  ExpectInvalid(b, 3, "4 values, expected 3");
  ExpectInvalid(b, 0, "expected 0");
}

TEST(CachedValueTest, RejectsTruncatedOrExtendedPayload) {
  const std::string b = EncodeEmbedding(Sample(4));
  for (size_t cut = 1; cut <= 16; ++cut) {
    ExpectInvalid(std::string_view(b).substr(0, b.size() - cut), 4, "bytes, expected");
  }
  ExpectInvalid(b + "x", 4, "bytes, expected");
  ExpectInvalid(b + std::string(16, '\0'), 4, "bytes, expected");
}

TEST(CachedValueTest, HugeClaimedCountIsRejectedWithoutAllocating) {
  std::string b = EncodeEmbedding(Sample(4));
  b[4] = b[5] = b[6] = b[7] = '\xff';  // 2^32 - 1 values claimed in a 32-byte string.
  ExpectInvalid(b, 0xffffffffu, "bytes, expected");
}

TEST(CachedValueTest, RejectsEveryFlippedBitInCountChecksumOrPayload) {
  const std::string good = EncodeEmbedding(Sample(8));
  for (size_t byte = 4; byte < good.size(); ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string b = good;
      b[byte] = static_cast<char>(b[byte] ^ (1 << bit));
      EXPECT_FALSE(DecodeEmbedding(b, 8).ok()) << "byte " << byte << " bit " << bit;
    }
  }
}

TEST(CachedValueTest, RejectsNonFiniteValuesEvenWithAValidChecksum) {
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    auto v = Sample(5);
    v[3] = bad;
    ExpectInvalid(EncodeEmbedding(v), 5, "non-finite value at index 3");
  }
}

// A smoke version of the fuzzing to come: random and mutated inputs never crash (run under
// ASan/UBSan to make that meaningful) and only an untouched encoding decodes.
TEST(CachedValueTest, ArbitraryBytesNeverCrash) {
  std::mt19937 rng(42);
  const std::string good = EncodeEmbedding(Sample(6));
  for (int i = 0; i < 20000; ++i) {
    std::string b;
    if (i % 2 == 0) {
      b.resize(rng() % 64);
      for (char& c : b) c = static_cast<char>(rng());
      if (b.size() >= 4 && i % 4 == 0) std::memcpy(b.data(), "TCE1", 4);
    } else {
      b = good;
      const int edits = 1 + static_cast<int>(rng() % 4);
      for (int e = 0; e < edits; ++e) b[rng() % b.size()] = static_cast<char>(rng());
      if (rng() % 3 == 0) b.resize(rng() % (b.size() + 8));
    }
    auto r = DecodeEmbedding(b, 6);
    if (r.ok()) {
      EXPECT_EQ(b, good);
    }
  }
}

}  // namespace
}  // namespace tailcut
