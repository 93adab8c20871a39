#include "cache/semantic_verifier.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace tailcut {
namespace {

SemanticPairFeatures Features(std::string_view query, std::string_view cached) {
  return ExtractSemanticPairFeatures(query, cached, /*cosine=*/0.9);
}

TEST(SemanticPairFeaturesTest, IdenticalTextsMatchOnEveryFeature) {
  const auto f = Features("How do I learn Python in 2024?", "How do I learn Python in 2024?");
  EXPECT_DOUBLE_EQ(f.cosine, 0.9);
  EXPECT_DOUBLE_EQ(f.token_jaccard, 1.0);
  EXPECT_DOUBLE_EQ(f.token_containment, 1.0);
  EXPECT_DOUBLE_EQ(f.content_jaccard, 1.0);
  EXPECT_DOUBLE_EQ(f.content_unmatched, 0.0);
  EXPECT_DOUBLE_EQ(f.number_mismatch, 0.0);
  EXPECT_DOUBLE_EQ(f.negation_mismatch, 0.0);
  EXPECT_DOUBLE_EQ(f.question_word_mismatch, 0.0);
  EXPECT_DOUBLE_EQ(f.entity_mismatch, 0.0);
  EXPECT_DOUBLE_EQ(f.length_ratio, 1.0);
  EXPECT_DOUBLE_EQ(f.length_diff_tokens, 0.0);
}

TEST(SemanticPairFeaturesTest, CaseAndPunctuationDoNotMatter) {
  const auto f = Features("what is the capital of france", "What is the capital of France?");
  EXPECT_DOUBLE_EQ(f.token_jaccard, 1.0);
  // "France" is name-like in the second text, but the first has the word: no mismatch.
  EXPECT_DOUBLE_EQ(f.entity_mismatch, 0.0);
}

TEST(SemanticPairFeaturesTest, DifferentNumbersAreCounted) {
  const auto f = Features("What was the best movie of 2014?", "What was the best movie of 2015?");
  EXPECT_DOUBLE_EQ(f.number_mismatch, 2.0);  // 2014 missing on one side, 2015 on the other.
  EXPECT_DOUBLE_EQ(f.content_unmatched, 2.0);
  EXPECT_LT(f.token_jaccard, 1.0);
  EXPECT_DOUBLE_EQ(f.question_word_mismatch, 0.0);
  // A number only one text has counts once; the count is capped.
  EXPECT_DOUBLE_EQ(Features("Top 10 books?", "Top books?").number_mismatch, 1.0);
  EXPECT_DOUBLE_EQ(Features("1 2 3 4 5", "6 7 8 9").number_mismatch,
                   SemanticPairFeatures::kCountCap);
}

TEST(SemanticPairFeaturesTest, NegationOnOneSideOnly) {
  EXPECT_DOUBLE_EQ(Features("Why do cats purr?", "Why don't cats purr?").negation_mismatch, 1.0);
  // The typographic apostrophe is a word-internal apostrophe too.
  EXPECT_DOUBLE_EQ(Features("Why do cats purr?", "Why don\u2019t cats purr?").negation_mismatch,
                   1.0);
  EXPECT_DOUBLE_EQ(Features("Why is it not raining?", "Why doesn't it rain?").negation_mismatch,
                   0.0);
  EXPECT_DOUBLE_EQ(
      Features("Can I live without water?", "Can I live with water?").negation_mismatch, 1.0);
}

TEST(SemanticPairFeaturesTest, QuestionWordMismatch) {
  EXPECT_DOUBLE_EQ(Features("Why is the sky blue?", "When is the sky blue?").question_word_mismatch,
                   1.0);
  EXPECT_DOUBLE_EQ(
      Features("Why is the sky blue?", "why is the sky so blue").question_word_mismatch, 0.0);
  // "what" and "how" do not count as content words, so only this feature sees the change.
  const auto f = Features("What is the way to learn Java?", "How to learn Java?");
  EXPECT_DOUBLE_EQ(f.question_word_mismatch, 1.0);
}

TEST(SemanticPairFeaturesTest, NamedEntityMissingFromTheOtherText) {
  const auto f = Features("Who will win, Trump or Clinton?", "Who will win, Trump or Sanders?");
  EXPECT_DOUBLE_EQ(f.entity_mismatch, 2.0);  // Clinton one way, Sanders the other.
  // A capital at the start of a sentence is not a name; "I" is never one.
  EXPECT_DOUBLE_EQ(Features("Where can I buy shoes?", "Where do I buy shoes").entity_mismatch, 0.0);
  // Capitals inside a word mark a name wherever it stands.
  EXPECT_DOUBLE_EQ(Features("iPhone or Android?", "Android or Windows?").entity_mismatch, 2.0);
}

TEST(SemanticPairFeaturesTest, LengthAndContainment) {
  const auto f = Features("How do I lose weight?", "How do I lose weight fast without exercise?");
  EXPECT_DOUBLE_EQ(f.token_containment, 1.0);  // Every word of the short one is in the long one.
  EXPECT_DOUBLE_EQ(f.length_ratio, 5.0 / 8.0);
  EXPECT_DOUBLE_EQ(f.length_diff_tokens, 3.0);
  const auto empty = Features("", "Hello there");
  EXPECT_DOUBLE_EQ(empty.length_ratio, 0.0);
  EXPECT_DOUBLE_EQ(empty.token_jaccard, 0.0);
  EXPECT_DOUBLE_EQ(Features("", "").token_jaccard, 1.0);
}

TEST(SemanticPairFeaturesTest, AntonymOnOneSide) {
  EXPECT_DOUBLE_EQ(Features("What are the advantages of solar power?",
                            "What are the disadvantages of solar power?")
                       .antonym_mismatch,
                   1.0);
  // Both words in one text, one in the other: still a different question.
  EXPECT_DOUBLE_EQ(Features("What are the advantages of solar power?",
                            "What are the advantages and disadvantages of solar power?")
                       .antonym_mismatch,
                   1.0);
  EXPECT_DOUBLE_EQ(Features("Best and worst movies?", "Worst and best films?").antonym_mismatch,
                   0.0);
  EXPECT_DOUBLE_EQ(Features("How do I buy a car?", "Where do I buy a car?").antonym_mismatch, 0.0);
}

TEST(SemanticPairFeaturesTest, OrderSwapOfSharedContentWords) {
  EXPECT_DOUBLE_EQ(
      Features("Why is Messi better than Ronaldo?", "Why is Ronaldo better than Messi?").order_swap,
      1.0);  // messi, better, ronaldo: all three pairs reversed.
  EXPECT_DOUBLE_EQ(Features("How do I convert miles to kilometers?",
                            "How can I convert miles into kilometers quickly?")
                       .order_swap,
                   0.0);
  // Only Canada and India change places: 3 of the 15 pairs of the six shared content words
  // (profitable, products, import, canada, sell, india) are reversed.
  EXPECT_DOUBLE_EQ(Features("Profitable products to import from Canada and sell in India?",
                            "Profitable products to import from India and sell in Canada?")
                       .order_swap,
                   3.0 / 15.0);
  EXPECT_DOUBLE_EQ(Features("Why?", "Why not?").order_swap, 0.0);  // Fewer than two shared.
}

TEST(SemanticPairFeaturesTest, ContentWordsAreStemmedAndSubstitutionsCounted) {
  // Inflections meet: ranking/rankings, improve/improving.
  const auto same = Features("How can I improve keyword rankings?", "Improving keyword ranking?");
  EXPECT_DOUBLE_EQ(same.content_jaccard, 1.0);
  EXPECT_DOUBLE_EQ(same.content_unmatched, 0.0);
  EXPECT_LT(same.token_jaccard, 1.0);  // Tokens are compared as written.
  // "given" replaced by "received": one substitution, two unmatched words.
  const auto swapped = Features("What is the best gift you have ever given?",
                                "What is the best gift you have ever received?");
  EXPECT_DOUBLE_EQ(swapped.content_substituted, 1.0);
  EXPECT_DOUBLE_EQ(swapped.content_unmatched, 2.0);
  EXPECT_DOUBLE_EQ(swapped.antonym_mismatch, 1.0);
  // A word added is no substitution.
  EXPECT_DOUBLE_EQ(Features("Best gift ever?", "Best birthday gift ever?").content_substituted,
                   0.0);
}

TEST(SemanticPairFeaturesTest, NamesMatchValues) {
  SemanticPairFeatures f;
  f.cosine = 1;
  f.entity_mismatch = 2;
  f.length_diff_tokens = 3;
  const auto& names = SemanticPairFeatures::Names();
  const auto values = f.Values();
  for (size_t i = 0; i < names.size(); ++i) {
    const double expected = names[i] == "cosine"               ? 1
                            : names[i] == "entity_mismatch"    ? 2
                            : names[i] == "length_diff_tokens" ? 3
                                                               : 0;
    EXPECT_EQ(values[i], expected) << names[i];
  }
}

// A small valid document; tests replace parts of it.
std::string Document(const std::string& features, const std::string& points,
                     const std::string& bias = "0.5", const std::string& default_share = "0.05") {
  return R"({"format": "tailcut.semantic_verifier/1", "model": "logistic_regression", "bias": )" +
         bias + R"(, "features": )" + features + R"(, "operating_points": )" + points +
         R"(, "default_max_wrong_hit_share": )" + default_share + "}";
}

const std::string kFeatures =
    R"([{"name": "cosine", "mean": 0.9, "scale": 0.05, "weight": 2.0},
        {"name": "number_mismatch", "mean": 0, "scale": 1, "weight": -3.0}])";
const std::string kPoints =
    R"([{"max_wrong_hit_share": 0.02, "threshold": 0.95, "hit_rate": 0.10, "wrong_hit_share": 0.019},
        {"max_wrong_hit_share": 0.05, "threshold": 0.80, "hit_rate": 0.30, "wrong_hit_share": 0.048},
        {"max_wrong_hit_share": 0.10, "threshold": 0.60, "hit_rate": 0.50, "wrong_hit_share": 0.11}])";

TEST(SemanticVerifierTest, ProbabilityIsTheLogisticOfTheStandardisedSum) {
  auto v = SemanticVerifier::FromJson(Document(kFeatures, kPoints));
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  SemanticPairFeatures f;
  f.cosine = 0.95;  // (0.95 - 0.9) / 0.05 = 1 -> 2.0
  f.number_mismatch = 1;
  const double z = 0.5 + 2.0 * 1.0 - 3.0 * 1.0;
  EXPECT_NEAR(v->Probability(f), 1.0 / (1.0 + std::exp(-z)), 1e-12);
  EXPECT_EQ(v->feature_names(), (std::vector<std::string>{"cosine", "number_mismatch"}));
  // Extreme sums saturate without overflow.
  f.cosine = 1e6;
  EXPECT_EQ(v->Probability(f), 1.0);
  f.cosine = -1e6;
  EXPECT_GE(v->Probability(f), 0.0);
  EXPECT_LT(v->Probability(f), 1e-100);
}

TEST(SemanticVerifierTest, ThresholdForPicksTheSafePointWithTheMostHits) {
  auto v = SemanticVerifier::FromJson(Document(kFeatures, kPoints));
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  // The 0.10 point measured 0.11 on the test split: not safe for δ = 0.10.
  EXPECT_DOUBLE_EQ(*v->ThresholdFor(0.10), 0.80);
  EXPECT_DOUBLE_EQ(*v->ThresholdFor(0.05), 0.80);
  EXPECT_DOUBLE_EQ(*v->ThresholdFor(0.048), 0.80);
  EXPECT_DOUBLE_EQ(*v->ThresholdFor(0.03), 0.95);
  EXPECT_DOUBLE_EQ(*v->ThresholdFor(0.5), 0.60);
  auto point = v->DefaultOperatingPoint();
  ASSERT_TRUE(point.ok());
  EXPECT_DOUBLE_EQ(point->hit_rate, 0.30);
  EXPECT_DOUBLE_EQ(v->default_max_wrong_hit_share(), 0.05);
}

TEST(SemanticVerifierTest, ThresholdForSaysWhatRangeExists) {
  auto v = SemanticVerifier::FromJson(Document(kFeatures, kPoints));
  ASSERT_TRUE(v.ok());
  auto none = v->ThresholdFor(0.01);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), Status::Code::kNotFound);
  EXPECT_NE(none.status().message().find("0.019"), std::string::npos) << none.status().message();
  EXPECT_NE(none.status().message().find("0.11"), std::string::npos) << none.status().message();
  EXPECT_EQ(v->ThresholdFor(-0.1).status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(v->ThresholdFor(std::nan("")).status().code(), Status::Code::kInvalidArgument);
}

void ExpectInvalid(const std::string& json, const std::string& fragment) {
  auto v = SemanticVerifier::FromJson(json);
  ASSERT_FALSE(v.ok()) << json;
  EXPECT_EQ(v.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(v.status().message().find(fragment), std::string::npos)
      << "'" << v.status().message() << "' lacks '" << fragment << "'";
}

TEST(SemanticVerifierTest, LoadingErrorsNameTheField) {
  ExpectInvalid("{", "not valid JSON");
  ExpectInvalid("[]", "JSON object");
  ExpectInvalid(R"({"format": "other/1"})", "format");
  // Missing field.
  ExpectInvalid(Document(R"([{"name": "cosine", "mean": 0.9, "scale": 0.05}])", kPoints),
                "features[0] \"weight\" is missing");
  ExpectInvalid(R"({"format": "tailcut.semantic_verifier/1", "model": "logistic_regression"})",
                "\"bias\" is missing");
  // Wrong type.
  ExpectInvalid(
      Document(R"([{"name": "cosine", "mean": 0.9, "scale": 0.05, "weight": "2"}])", kPoints),
      "features[0] \"weight\" must be a number, not string");
  ExpectInvalid(Document(kFeatures, "{}"), "operating_points");
  ExpectInvalid(Document(R"([{"name": 3, "mean": 0, "scale": 1, "weight": 1}])", kPoints),
                "features[0] needs a string \"name\"");
  // Non-finite weight: JSON has no NaN or infinity; Python's json writes them as bare words,
  // and nlohmann's parser refuses numbers too large for a double (1e999) as well.
  ExpectInvalid(
      Document(R"([{"name": "cosine", "mean": 0.9, "scale": 0.05, "weight": NaN}])", kPoints),
      "non-finite number (NaN or Infinity)");
  ExpectInvalid(Document(kFeatures, kPoints, "-Infinity"), "non-finite number");
  ExpectInvalid(Document(kFeatures, kPoints, "1e999"), "not valid JSON");
  // Out-of-range values and unknown names.
  ExpectInvalid(Document(R"([{"name": "cosine", "mean": 0.9, "scale": 0, "weight": 1}])", kPoints),
                "\"scale\" must be positive");
  ExpectInvalid(Document(R"([{"name": "colour", "mean": 0, "scale": 1, "weight": 1}])", kPoints),
                "unknown feature \"colour\"");
  ExpectInvalid(Document(R"([{"name": "cosine", "mean": 0, "scale": 1, "weight": 1},
                             {"name": "cosine", "mean": 0, "scale": 1, "weight": 1}])",
                         kPoints),
                "repeats \"cosine\"");
  ExpectInvalid(Document(kFeatures, R"([{"max_wrong_hit_share": 0.05, "threshold": 1.5,
                                         "hit_rate": 0.3, "wrong_hit_share": 0.04}])"),
                "operating_points[0] \"threshold\" must be in [0, 1]");
  // The default δ must have a point.
  ExpectInvalid(Document(kFeatures, kPoints, "0.5", "0.01"), "default_max_wrong_hit_share");
}

TEST(SemanticVerifierTest, EmbeddingVariantIsOptionalAndMustNameOne) {
  auto none = SemanticVerifier::FromJson(Document(kFeatures, kPoints));
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->embedding_variant(), "");
  std::string doc = Document(kFeatures, kPoints);
  doc.insert(1, R"("embedding_variant": "int8-per-token", )");
  auto named = SemanticVerifier::FromJson(doc);
  ASSERT_TRUE(named.ok()) << named.status().ToString();
  EXPECT_EQ(named->embedding_variant(), "int8-per-token");
  std::string empty = Document(kFeatures, kPoints);
  empty.insert(1, R"("embedding_variant": "", )");
  ExpectInvalid(empty, "\"embedding_variant\" must be a non-empty string");
  std::string number = Document(kFeatures, kPoints);
  number.insert(1, R"("embedding_variant": 8, )");
  ExpectInvalid(number, "\"embedding_variant\" must be a non-empty string");
}

TEST(SemanticVerifierTest, ShippedDefaultLoadsAndSeparatesObviousPairs) {
  auto v = SemanticVerifier::Default();
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_FALSE(SemanticVerifier::DefaultJson().empty());
  auto point = v->DefaultOperatingPoint();
  ASSERT_TRUE(point.ok()) << point.status().ToString();
  EXPECT_LE(point->wrong_hit_share, v->default_max_wrong_hit_share());
  EXPECT_GT(point->hit_rate, 0.0);
  // The cosines are all-MiniLM-L6-v2's for these texts (tailcut semantic-pairs). A rewording
  // is accepted; a question with its two names swapped embeds even closer (0.998) and one
  // about another county close too, and the mismatch features turn both away.
  const auto same =
      ExtractSemanticPairFeatures("How can I learn Python?", "How do I learn Python?", 0.9870);
  const auto swapped = ExtractSemanticPairFeatures("Why is Ronaldo better than Messi?",
                                                   "Why is Messi better than Ronaldo?", 0.9979);
  const auto county = ExtractSemanticPairFeatures(
      "Which is a suitable inpatient drug and alcohol rehab center near Montgomery County GA?",
      "Which is a suitable inpatient drug and alcohol rehab center near Pike County GA?", 0.9650);
  EXPECT_GE(v->Probability(same), point->threshold);
  EXPECT_GT(swapped.cosine, same.cosine);
  EXPECT_LT(v->Probability(swapped), point->threshold);
  EXPECT_LT(v->Probability(county), point->threshold);
}

}  // namespace
}  // namespace tailcut
