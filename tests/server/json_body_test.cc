#include "server/json_body.h"

#include <gtest/gtest.h>

#include <limits>
#include <vector>

namespace tailcut {
namespace {

TEST(ParseJsonObjectTest, ParsesAnObject) {
  auto j = ParseJsonObject(R"({"input": "hi", "dimensions": 16})");
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ((*j)["dimensions"], 16);
}

TEST(ParseJsonObjectTest, SyntaxErrorsNameThePosition) {
  auto j = ParseJsonObject(R"({"input": "hi",)");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(j.status().message().find("not valid JSON"), std::string::npos);
}

// nlohmann::json reports a number beyond a double as out_of_range, not parse_error; the error
// path let it escape and end the server (found by fuzz_openai_json).
TEST(ParseJsonObjectTest, NumberOverflowIsInvalidArgumentNotAnException) {
  for (const char* body : {R"({"input": "hi", "dimensions": 1e400})", R"({"x": [-1e999]})",
                           R"({"x": 123456789e999999999})"}) {
    Result<nlohmann::json> j = Status::Internal("not run");
    ASSERT_NO_THROW(j = ParseJsonObject(body)) << body;
    ASSERT_FALSE(j.ok()) << body;
    EXPECT_EQ(j.status().code(), Status::Code::kInvalidArgument) << body;
    EXPECT_NE(j.status().message().find("number overflow"), std::string::npos)
        << j.status().message();
  }
}

TEST(FindNonFiniteTest, FindsTheFirstNanOrInfinity) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(FindNonFinite(std::vector<float>{}), std::nullopt);
  EXPECT_EQ(FindNonFinite(std::vector<float>{0.0f, -1.0f, 3e38f}), std::nullopt);
  EXPECT_EQ(FindNonFinite(std::vector<float>{0.0f, nan, inf}), 1u);
  EXPECT_EQ(FindNonFinite(std::vector<float>{-inf}), 0u);
}

// A non-finite value used to be written as 0, so a broken model answered plausible numbers.
TEST(AppendFloatArrayTest, NonFiniteIsNeverWrittenAsANumber) {
  std::string out;
  AppendFloatArray(std::vector<float>{1.5f, std::numeric_limits<float>::quiet_NaN(), -2.0f}, &out);
  EXPECT_EQ(out, "[1.5,null,-2]");
  EXPECT_FALSE(nlohmann::json::parse(out)[1].is_number());
}

}  // namespace
}  // namespace tailcut
