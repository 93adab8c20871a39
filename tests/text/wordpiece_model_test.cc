#include "text/wordpiece_model.h"

#include <gtest/gtest.h>

namespace tailcut {
namespace {

class WordPieceModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const VocabEntries vocab = {
        {"[UNK]", 0}, {"un", 1}, {"##aff", 2},  {"##able", 3},          {"a", 4},  {"##a", 5},
        {"aa", 6},    {"b", 7},  {"\u00E9", 8}, {"##\u00E9t\u00E9", 9}, {"##", 10}};
    auto model = WordPieceModel::Create(vocab, WordPieceConfig{});
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    model_ = std::make_unique<WordPieceModel>(std::move(model).value());
  }

  std::vector<int64_t> Tokenize(std::string_view word, size_t chars = 0) {
    std::vector<int64_t> out = {99};  // Existing ids must be kept.
    model_->TokenizeWord(word, chars == 0 ? word.size() : chars, out);
    out.erase(out.begin());
    return out;
  }

  std::unique_ptr<WordPieceModel> model_;
};

TEST_F(WordPieceModelTest, GreedyLongestMatchWithContinuationPrefix) {
  EXPECT_EQ(Tokenize("unaffable"), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(Tokenize("aaa"), (std::vector<int64_t>{6, 5}));  // "aa" then "##a", not a/##a/##a.
  EXPECT_EQ(Tokenize("a"), (std::vector<int64_t>{4}));
}

TEST_F(WordPieceModelTest, UncoverableWordIsOneUnknown) {
  EXPECT_EQ(Tokenize("unb"), (std::vector<int64_t>{0}));  // "##b" is missing.
  EXPECT_EQ(Tokenize("xyz"), (std::vector<int64_t>{0}));
  EXPECT_EQ(Tokenize("ba"), (std::vector<int64_t>{7, 5}));
}

TEST_F(WordPieceModelTest, MultiByteCharactersAreTriedWhole) {
  EXPECT_EQ(Tokenize("\u00E9\u00E9t\u00E9", 4), (std::vector<int64_t>{8, 9}));
  EXPECT_EQ(Tokenize("\u00E9x", 2), (std::vector<int64_t>{0}));
}

TEST_F(WordPieceModelTest, WordsLongerThanTheLimitAreUnknown) {
  const std::string hundred(100, 'a');
  EXPECT_EQ(Tokenize(hundred).size(), 99u);  // "aa" then 98 x "##a".
  EXPECT_EQ(Tokenize(hundred + "a"), (std::vector<int64_t>{0}));
  // The limit counts code points, not bytes: 100 characters in 199 bytes still tokenize.
  std::string accented = "\u00E9";
  for (int i = 0; i < 33; ++i) accented += "\u00E9t\u00E9";
  EXPECT_EQ(Tokenize(accented, 100).size(), 34u);
  EXPECT_EQ(Tokenize(accented + "\u00E9t\u00E9", 103), (std::vector<int64_t>{0}));
}

TEST(WordPieceModelCreateTest, MissingUnknownTokenIsAnError) {
  const auto model = WordPieceModel::Create({{"a", 0}}, WordPieceConfig{});
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("[UNK]"), std::string::npos);
}

TEST(VocabMapTest, FindsEveryKeyAndNothingElse) {
  VocabEntries entries;
  for (int i = 0; i < 5000; ++i) entries.emplace_back("tok" + std::to_string(i), i);
  entries.emplace_back("tok7", 123456);  // A later duplicate wins.
  const VocabMap map = VocabMap::Build(entries);
  EXPECT_EQ(map.size(), 5000u);
  for (int i = 0; i < 5000; ++i) {
    EXPECT_EQ(map.Find("tok" + std::to_string(i)), i == 7 ? 123456 : i);
  }
  EXPECT_EQ(map.Find("tok"), VocabMap::kNotFound);
  EXPECT_EQ(map.Find(""), VocabMap::kNotFound);
  EXPECT_EQ(map.Find("tok5000"), VocabMap::kNotFound);
  EXPECT_EQ(VocabMap().Find("x"), VocabMap::kNotFound);
}

}  // namespace
}  // namespace tailcut
