// The operating-point table both semantic-cache documents carry, and the reranker policy's
// document: what parses, what is refused (naming the field), and which point a bound picks.
#include "cache/semantic_operating_points.h"

#include <gtest/gtest.h>

#include <string>

namespace tailcut {
namespace {

std::string Document(const std::string& replace_key = "", const std::string& with = "") {
  std::string doc = R"({"format": "tailcut.semantic_reranker/1",
    "reranker_variant": "int8-per-token", "embedding_variant": "fp32", "min_cosine": 0.8,
    "default_max_wrong_hit_share": 0.09, "operating_points": [
      {"max_wrong_hit_share": 0.05, "threshold": 0.95, "hit_rate": 0.06, "wrong_hit_share": 0.065},
      {"max_wrong_hit_share": 0.08, "threshold": 0.93, "hit_rate": 0.14, "wrong_hit_share": 0.083},
      {"max_wrong_hit_share": 0.09, "threshold": 0.91, "hit_rate": 0.22, "wrong_hit_share": 0.087}]
  })";
  if (!replace_key.empty()) {
    const size_t at = doc.find("\"" + replace_key + "\"");
    const size_t value = doc.find_first_not_of(' ', doc.find(':', at) + 1);
    // operating_points, the one array, is the last key.
    const size_t end = doc[value] == '[' ? doc.rfind(']') + 1 : doc.find_first_of(",}", value);
    doc.replace(at, end - at, with);
  }
  return doc;
}

TEST(SemanticRerankerDocumentTest, ParsesTheCalibratorsDocument) {
  auto doc = SemanticRerankerDocument::FromJson(Document());
  ASSERT_TRUE(doc.ok()) << doc.status().message();
  EXPECT_EQ(doc->reranker_variant, "int8-per-token");
  EXPECT_EQ(doc->embedding_variant, "fp32");
  EXPECT_DOUBLE_EQ(doc->min_cosine, 0.8);
  EXPECT_EQ(doc->points.points().size(), 3u);
  EXPECT_DOUBLE_EQ(doc->points.default_max_wrong_hit_share(), 0.09);
}

TEST(SemanticRerankerDocumentTest, ABoundPicksTheMostHitsAmongTheSafeEnoughPoints) {
  auto doc = SemanticRerankerDocument::FromJson(Document());
  ASSERT_TRUE(doc.ok());
  // Chosen by the measured (test) share: 0.087 <= 0.09 and the most hits.
  EXPECT_DOUBLE_EQ(doc->points.For(0.09)->threshold, 0.91);
  EXPECT_DOUBLE_EQ(doc->points.For(0.085)->threshold, 0.93);
  EXPECT_DOUBLE_EQ(doc->points.For(1.0)->threshold, 0.91);
  auto none = doc->points.For(0.06);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), Status::Code::kNotFound);
  EXPECT_NE(none.status().message().find("0.065"), std::string::npos) << none.status().message();
  EXPECT_EQ(doc->points.For(-0.1).status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(doc->points.For(1.5).status().code(), Status::Code::kInvalidArgument);
}

TEST(SemanticRerankerDocumentTest, RefusesABrokenDocumentNamingTheField) {
  struct Case {
    std::string text;
    std::string names;
  };
  const Case cases[] = {
      {"not json", "not valid JSON"},
      {"[1, 2]", "JSON object"},
      {Document("format", R"("format": "tailcut.semantic_verifier/1")"), "\"format\""},
      {Document("reranker_variant", R"("reranker_variant": "")"), "\"reranker_variant\""},
      {Document("embedding_variant", R"("embedding_variant": 3)"), "\"embedding_variant\""},
      {Document("min_cosine", R"("min_cosine": 1.5)"), "\"min_cosine\""},
      {Document("min_cosine", R"("min_cosine": "high")"), "\"min_cosine\""},
      {Document("default_max_wrong_hit_share", R"("default_max_wrong_hit_share": 0.01)"),
       "default_max_wrong_hit_share"},
      {Document("operating_points", R"("operating_points": [])"), "\"operating_points\""},
      {Document("operating_points",
                R"("operating_points": [{"max_wrong_hit_share": 0.1, "threshold": 2,
                   "hit_rate": 0.2, "wrong_hit_share": 0.09}])"),
       "\"threshold\" must be in [0, 1]"},
  };
  for (const Case& c : cases) {
    auto doc = SemanticRerankerDocument::FromJson(c.text);
    ASSERT_FALSE(doc.ok()) << c.text;
    EXPECT_EQ(doc.status().code(), Status::Code::kInvalidArgument) << c.text;
    EXPECT_NE(doc.status().message().find(c.names), std::string::npos)
        << c.text << " -> " << doc.status().message();
  }
}

TEST(SemanticRerankerDocumentTest, AMissingFileIsNotFoundNamingIt) {
  auto doc = SemanticRerankerDocument::Load("/nonexistent/semantic_operating_points.json");
  ASSERT_FALSE(doc.ok());
  EXPECT_EQ(doc.status().code(), Status::Code::kNotFound);
  EXPECT_NE(doc.status().message().find("/nonexistent/"), std::string::npos);
}

}  // namespace
}  // namespace tailcut
