// Tests for Triton's binary tensor extension (src/server/kserve_binary.h): splitting a body at
// the inference header, handing each input its bytes, decoding BYTES elements, choosing the
// outputs that go binary, and the response's framing.
#include "server/kserve_binary.h"

#include <gtest/gtest.h>

#include "server/kserve_api.h"

namespace tailcut {
namespace {

std::string LengthPrefixed(std::initializer_list<std::string_view> items) {
  std::string out;
  for (auto s : items) {
    const auto n = static_cast<uint32_t>(s.size());
    for (int i = 0; i < 4; ++i) out += static_cast<char>((n >> (8 * i)) & 0xff);
    out += s;
  }
  return out;
}

TEST(KServeBinaryTest, SplitsTheBodyWhereTheHeaderSays) {
  auto split = SplitKServeBinaryBody("{\"a\":1}XYZ", "7");
  ASSERT_TRUE(split.ok()) << split.status().message();
  EXPECT_EQ(split->json, "{\"a\":1}");
  EXPECT_EQ(split->binary, "XYZ");
  for (std::string_view bad : {"", "-1", "7 ", "0x7", "11", "99999999999999999999"}) {
    auto s = SplitKServeBinaryBody("{\"a\":1}XYZ", bad);
    EXPECT_EQ(s.status().code(), Status::Code::kInvalidArgument) << bad;
    EXPECT_NE(s.status().message().find("Inference-Header-Content-Length"), std::string::npos);
  }
}

TEST(KServeBinaryTest, EachInputTakesItsBytesInOrderAndNoneAreLeftOver) {
  const auto inputs = nlohmann::json::parse(R"([
    {"name": "a", "parameters": {"binary_data_size": 2}},
    {"name": "b", "data": [1]},
    {"name": "c", "parameters": {"binary_data_size": 3}}])");
  auto raw = KServeBinaryInputs(inputs, "xxyyy");
  ASSERT_TRUE(raw.ok()) << raw.status().message();
  ASSERT_EQ(raw->size(), 3u);
  EXPECT_EQ((*raw)[0], "xx");
  EXPECT_FALSE((*raw)[1].has_value());
  EXPECT_EQ((*raw)[2], "yyy");

  auto left = KServeBinaryInputs(inputs, "xxyyyz");
  EXPECT_NE(left.status().message().find("1 bytes after the inference header belong to no input"),
            std::string::npos)
      << left.status().message();
  auto short_body = KServeBinaryInputs(inputs, "xxy");
  EXPECT_NE(short_body.status().message().find("inputs[2].parameters.binary_data_size is 3 bytes"),
            std::string::npos)
      << short_body.status().message();
  auto negative = KServeBinaryInputs(
      nlohmann::json::parse(R"([{"name": "a", "parameters": {"binary_data_size": -1}}])"), "");
  EXPECT_EQ(negative.status().code(), Status::Code::kInvalidArgument);
  // Without a header there are no bytes: an input that claims some is refused.
  auto none = KServeBinaryInputs(inputs, "");
  EXPECT_EQ(none.status().code(), Status::Code::kInvalidArgument);
}

TEST(KServeBinaryTest, DecodesLengthPrefixedStringsAndRefusesTruncatedOnes) {
  auto texts = DecodeKServeBinaryStrings(LengthPrefixed({"hello", "", "tail"}), "text");
  ASSERT_TRUE(texts.ok()) << texts.status().message();
  EXPECT_EQ(*texts, (std::vector<std::string>{"hello", "", "tail"}));
  std::string cut = LengthPrefixed({"hello"});
  cut.pop_back();
  auto bad = DecodeKServeBinaryStrings(cut, "text");
  EXPECT_NE(bad.status().message().find("element 0 says 5 bytes but only 4 are left"),
            std::string::npos)
      << bad.status().message();
  auto partial_length = DecodeKServeBinaryStrings(std::string_view("\x01\x00", 2), "text");
  EXPECT_NE(partial_length.status().message().find("4-byte length"), std::string::npos);
  // A length near 4 GiB is refused from the size left, not allocated.
  auto huge = DecodeKServeBinaryStrings(std::string_view("\xff\xff\xff\xff" "ab", 6), "text");
  EXPECT_EQ(huge.status().code(), Status::Code::kInvalidArgument);
}

TEST(KServeBinaryTest, AShapeWhoseByteCountWrapsIsRefused) {
  // 2^61 INT64 elements are 2^64 bytes, 0 once wrapped in 64 bits: zero bytes must not pass
  // for them (a model with a dynamic axis would then read far past the tensor).
  const auto input = nlohmann::json::parse(
      R"({"name":"ids","datatype":"INT64","shape":[2305843009213693952],)"
      R"("parameters":{"binary_data_size":0}})");
  const std::string_view empty;
  auto t = ParseKServeTensor(input, 0, &empty);
  EXPECT_EQ(t.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(t.status().message().find("binary_data_size is 0 bytes"), std::string::npos)
      << t.status().message();
}

TEST(KServeBinaryTest, OutputsGoBinaryByTheRequestOrTheirOwnParameter) {
  auto read = [](const char* body) {
    auto r = KServeBinaryOutputs::Read(nlohmann::json::parse(body));
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? *r : KServeBinaryOutputs{};
  };
  EXPECT_FALSE(read(R"({"inputs": []})").any());
  auto all = read(R"({"parameters": {"binary_data_output": true},
                      "outputs": [{"name": "x", "parameters": {"binary_data": false}}]})");
  EXPECT_TRUE(all.Binary("y"));
  EXPECT_FALSE(all.Binary("x"));
  auto one = read(R"({"outputs": [{"name": "x", "parameters": {"binary_data": true}}]})");
  EXPECT_TRUE(one.Binary("x"));
  EXPECT_FALSE(one.Binary("y"));
  auto bad = KServeBinaryOutputs::Read(
      nlohmann::json::parse(R"({"outputs": [{"name": "x", "parameters": {"binary_data": 1}}]})"));
  EXPECT_NE(bad.status().message().find("outputs[0].parameters.binary_data must be a boolean"),
            std::string::npos);
}

TEST(KServeBinaryTest, ABinaryAnswerSaysWhereItsJsonEnds) {
  HttpResponse json_only;
  SetKServeResponseBody("{}", "", false, &json_only);
  EXPECT_EQ(json_only.body, "{}");
  EXPECT_EQ(json_only.content_type, "application/json");
  HttpResponse binary;
  SetKServeResponseBody("{\"o\":1}", std::string("\0\1", 2), true, &binary);
  EXPECT_EQ(binary.body, std::string("{\"o\":1}\0\1", 9));
  ASSERT_EQ(binary.headers.size(), 1u);
  EXPECT_EQ(binary.headers[0].first, "Inference-Header-Content-Length");
  EXPECT_EQ(binary.headers[0].second, "7");
  EXPECT_EQ(binary.content_type, "application/octet-stream");
}

}  // namespace
}  // namespace tailcut
