#include "engine/tensor.h"

#include <gtest/gtest.h>

namespace tailcut {
namespace {

TEST(TensorTest, DataTypeNamesRoundTrip) {
  for (DataType t :
       {DataType::kBool, DataType::kUint8, DataType::kInt8, DataType::kInt16, DataType::kInt32,
        DataType::kInt64, DataType::kFp16, DataType::kFp32, DataType::kFp64, DataType::kBytes}) {
    auto back = DataTypeFromName(DataTypeName(t));
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(*back, t);
  }
  EXPECT_EQ(DataTypeSize(DataType::kBytes), 0u);  // Elements of any length.
  EXPECT_FALSE(DataTypeFromName("STRING").has_value());
  EXPECT_FALSE(DataTypeFromName("fp32").has_value());
}

TEST(TensorTest, ElementCountRejectsNegativeAndOverflow) {
  EXPECT_EQ(*ElementCount({2, 3, 4}), 24);
  EXPECT_EQ(*ElementCount({}), 1);
  EXPECT_EQ(*ElementCount({5, 0}), 0);
  EXPECT_FALSE(ElementCount({-1, 3}).has_value());
  EXPECT_FALSE(ElementCount({1LL << 40, 1LL << 40}).has_value());
  EXPECT_EQ(ShapeToString({-1, 384}), "[?, 384]");
}

}  // namespace
}  // namespace tailcut
