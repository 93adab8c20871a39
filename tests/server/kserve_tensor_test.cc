#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "server/kserve_api.h"
#include "server/kserve_binary.h"

namespace tailcut {
namespace {

// Every finite half survives HalfToFloat -> FloatToHalf. FloatToHalf used to shift
// subnormals one bit too far, halving them (2^-24 became 0; found by fuzz_kserve_json's round
// trip check).
TEST(HalfFloatTest, EveryFiniteHalfRoundTrips) {
  int mismatches = 0;
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const float f = HalfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    if (FloatToHalf(f) != h) {
      ADD_FAILURE() << "half 0x" << std::hex << h << " -> " << f << " -> 0x" << FloatToHalf(f);
      if (++mismatches == 5) break;
    }
  }
}

TEST(HalfFloatTest, SubnormalsRoundToNearestEven) {
  const float unit = std::ldexp(1.0f, -24);  // The smallest half subnormal.
  EXPECT_EQ(FloatToHalf(unit), 0x0001);
  EXPECT_EQ(FloatToHalf(-unit), 0x8001);
  EXPECT_EQ(FloatToHalf(unit / 2), 0x0000);                          // A tie: to even (zero).
  EXPECT_EQ(FloatToHalf(unit * 0.5000001f), 0x0001);                 // Just above the tie.
  EXPECT_EQ(FloatToHalf(unit * 1.5f), 0x0002);                       // A tie: to even.
  EXPECT_EQ(FloatToHalf(unit * 2.5f), 0x0002);                       // A tie: to even.
  EXPECT_EQ(FloatToHalf(6.1e-5f), 0x03ff);                           // The largest subnormal.
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -14) - unit / 4), 0x0400);  // Rounds up to normal.
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -14)), 0x0400);             // The smallest normal.
}

TEST(HalfFloatTest, NormalsAndSpecials) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);  // Rounds past the largest half: infinity.
  EXPECT_EQ(FloatToHalf(INFINITY), 0x7c00);
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(NAN))));
}

TEST(ParseKServeTensorTest, Fp16SubnormalIsConvertedExactly) {
  const auto input = nlohmann::json::parse(
      R"({"name": "h", "datatype": "FP16", "shape": [2], "data": [5.9604644775390625e-08, 6.1e-05]})");
  auto t = ParseKServeTensor(input, 0);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->data.size(), 4u);
  EXPECT_EQ(t->As<uint16_t>()[0], 0x0001);
  EXPECT_EQ(t->As<uint16_t>()[1], 0x03ff);
}

// BYTES inputs (encoded images for an image model): strings in JSON, length-prefixed
// elements in binary, counted against the shape either way.
TEST(ParseKServeTensorTest, BytesComeAsJsonStringsOrLengthPrefixedBinary) {
  auto json = ParseKServeTensor(
      nlohmann::json::parse(R"({"name": "img", "datatype": "BYTES", "shape": [2, 1],
                               "data": [["ab"], ["c"]]})"),
      0);
  ASSERT_TRUE(json.ok()) << json.status().ToString();
  EXPECT_EQ(json->type, DataType::kBytes);
  EXPECT_EQ(json->elements, (std::vector<std::string>{"ab", "c"}));
  EXPECT_TRUE(json->data.empty());

  const std::string raw =
      EncodeKServeBinaryString(std::string("\xff\xd8\x00", 3)) + EncodeKServeBinaryString("");
  const std::string_view view(raw);
  auto binary = ParseKServeTensor(nlohmann::json::parse(
                                      R"({"name": "img", "datatype": "BYTES", "shape": [2],
              "parameters": {"binary_data_size": 11}})"),
                                  0, &view);
  ASSERT_TRUE(binary.ok()) << binary.status().ToString();
  EXPECT_EQ(binary->elements, (std::vector<std::string>{std::string("\xff\xd8\x00", 3), ""}));

  auto number = ParseKServeTensor(
      nlohmann::json::parse(R"({"name": "img", "datatype": "BYTES", "shape": [1], "data": [7]})"),
      0);
  ASSERT_FALSE(number.ok());
  EXPECT_NE(number.status().message().find("where a string is expected"), std::string::npos);
  auto count = ParseKServeTensor(
      nlohmann::json::parse(
          R"({"name": "img", "datatype": "BYTES", "shape": [3], "data": ["a", "b"]})"),
      0);
  ASSERT_FALSE(count.ok());
  EXPECT_NE(count.status().message().find("has 2 elements but shape [3] needs 3"),
            std::string::npos)
      << count.status().message();
  auto extra = ParseKServeTensor(
      nlohmann::json::parse(
          R"({"name": "img", "datatype": "BYTES", "shape": [1], "data": ["a", "b", 3]})"),
      0);
  ASSERT_FALSE(extra.ok());
  EXPECT_NE(extra.status().message().find("has 3 elements"), std::string::npos)
      << extra.status().message();
}

TEST(AppendKServeTensorTest, BytesOutputsAsJsonStringsOrBinary) {
  Tensor t;
  t.name = "logits";
  t.type = DataType::kBytes;
  t.shape = {1, 2};
  t.elements = {"0.500000:3:tabby, \"cat\"", "0.100000:1"};
  std::string out;
  ASSERT_TRUE(AppendKServeTensor(t, &out).ok());
  EXPECT_EQ(out, R"({"name":"logits","datatype":"BYTES","shape":[1,2],)"
                 R"("data":["0.500000:3:tabby, \"cat\"","0.100000:1"]})");
  std::string json, binary = "x";
  ASSERT_TRUE(AppendKServeTensor(t, &json, &binary).ok());
  const std::string want =
      "x" + EncodeKServeBinaryString(t.elements[0]) + EncodeKServeBinaryString(t.elements[1]);
  EXPECT_EQ(binary, want);
  EXPECT_NE(json.find("\"binary_data_size\":" + std::to_string(want.size() - 1)), std::string::npos)
      << json;
}

template <typename T>
Tensor MakeTensor(const std::string& name, DataType type, const std::vector<T>& values) {
  Tensor t;
  t.name = name;
  t.type = type;
  t.shape = {static_cast<int64_t>(values.size())};
  const auto* p = reinterpret_cast<const std::byte*>(values.data());
  t.data.assign(p, p + values.size() * sizeof(T));
  return t;
}

TEST(AppendKServeTensorTest, WritesFiniteFloats) {
  std::string out;
  ASSERT_TRUE(AppendKServeTensor(MakeTensor<float>("y", DataType::kFp32, {1.5f, -0.25f}), &out)
                  .ok());
  EXPECT_EQ(out, R"({"name":"y","datatype":"FP32","shape":[2],"data":[1.5,-0.25]})");
  out.clear();
  ASSERT_TRUE(AppendKServeTensor(MakeTensor<double>("d", DataType::kFp64, {0.5, 2.0}), &out).ok());
  EXPECT_EQ(out, R"({"name":"d","datatype":"FP64","shape":[2],"data":[0.5,2.0]})");
}

// NaN and infinity were written as 0: a broken model looked like one that answered zeros.
TEST(AppendKServeTensorTest, NonFiniteValuesAreAnErrorNamingTheOutput) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor cases[] = {
      MakeTensor<float>("logits", DataType::kFp32, {1.0f, nan}),
      MakeTensor<float>("logits", DataType::kFp32, {1.0f, -inf}),
      MakeTensor<uint16_t>("logits", DataType::kFp16, {0x3c00, 0x7c00}),  // 1, +inf
      MakeTensor<uint16_t>("logits", DataType::kFp16, {0x3c00, 0xfe00}),  // 1, NaN
      MakeTensor<double>("logits", DataType::kFp64,
                         {1.0, std::numeric_limits<double>::quiet_NaN()}),
      MakeTensor<double>("logits", DataType::kFp64, {1.0, std::numeric_limits<double>::infinity()}),
  };
  for (const Tensor& t : cases) {
    std::string out = "before";
    const Status s = AppendKServeTensor(t, &out);
    ASSERT_FALSE(s.ok()) << DataTypeName(t.type);
    EXPECT_EQ(s.code(), Status::Code::kInternal);
    EXPECT_NE(s.message().find("non-finite value (NaN or infinity) in output 'logits' at "
                               "element 1"),
              std::string::npos)
        << s.message();
    EXPECT_EQ(out, "before") << "nothing is written on failure";
  }
}

TEST(AppendKServeTensorTest, IntegersAreNeverNonFinite) {
  std::string out;
  ASSERT_TRUE(
      AppendKServeTensor(MakeTensor<uint16_t>("h", DataType::kInt16, {0x7c00, 0xfe00}), &out).ok());
  EXPECT_EQ(out, R"({"name":"h","datatype":"INT16","shape":[2],"data":[31744,-512]})");
}

}  // namespace
}  // namespace tailcut
