#include "cache/cache_key.h"

#include <gtest/gtest.h>

#include <vector>

namespace tailcut {
namespace {

TEST(CacheKeyTest, HexRoundTrips) {
  const CacheKey key = MakeTextCacheKey({"m", "fp32", "digest", "readout", true},
                                        std::vector<int64_t>{101, 7592, 102});
  const std::string hex = key.ToHex();
  ASSERT_EQ(hex.size(), 32u);
  const auto back = CacheKey::FromHex(hex);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, key);
  EXPECT_EQ(CacheKey::FromHex("0000000000000001ffffffffffffffff"),
            (CacheKey{1, 0xffffffffffffffffull}));
}

TEST(CacheKeyTest, FromHexRejectsAnythingButThirtyTwoHexDigits) {
  EXPECT_FALSE(CacheKey::FromHex(""));
  EXPECT_FALSE(CacheKey::FromHex("0123456789abcdef0123456789abcde"));    // 31
  EXPECT_FALSE(CacheKey::FromHex("0123456789abcdef0123456789abcdef0"));  // 33
  EXPECT_FALSE(CacheKey::FromHex("0123456789abcdeg0123456789abcdef"));   // not hex
  EXPECT_FALSE(CacheKey::FromHex("+123456789abcdef0123456789abcdef"));   // sign
  EXPECT_FALSE(CacheKey::FromHex(" 123456789abcdef0123456789abcdef"));   // space
}

}  // namespace
}  // namespace tailcut
