#include "text/wordpiece_tokenizer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "test_util.h"

namespace tailcut {
namespace {

using ::tailcut::testing::TempFile;
using ::tailcut::testing::TinyTokenizerJson;
using Ids = std::vector<int64_t>;

class TinyTokenizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const TempFile file(TinyTokenizerJson().Render());
    auto tokenizer = WordPieceTokenizer::FromTokenizerJson(file.path(), 16);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
    tokenizer_ = std::move(tokenizer).value();
  }

  Ids Encode(std::string_view text, int max_length = 0) {
    EncodeOptions options;
    options.max_length_tokens = max_length;
    auto encoding = tokenizer_->Encode(text, options);
    EXPECT_TRUE(encoding.ok()) << encoding.status().ToString();
    return encoding.ok() ? encoding->ids : Ids{};
  }

  std::unique_ptr<WordPieceTokenizer> tokenizer_;
};

TEST_F(TinyTokenizerTest, EncodesWithSpecialTokens) {
  EXPECT_EQ(Encode("Hello, World!"), (Ids{2, 5, 13, 6, 7, 3}));
  EXPECT_EQ(Encode("  Caf\u00E9\t"), (Ids{2, 14, 3}));
  EXPECT_EQ(Encode("unaffable"), (Ids{2, 8, 9, 10, 3}));
  EXPECT_EQ(Encode("\u4E2D\u4E2D"), (Ids{2, 15, 15, 3}));
  EXPECT_EQ(Encode(""), (Ids{2, 3}));
  EXPECT_EQ(Encode(" \n\t "), (Ids{2, 3}));
  EXPECT_EQ(Encode("zzz"), (Ids{2, 1, 3}));
}

TEST_F(TinyTokenizerTest, LiteralSpecialTokensInTextAreMatchedBeforeNormalisation) {
  EXPECT_EQ(Encode("[SEP]"), (Ids{2, 3, 3}));
  EXPECT_EQ(Encode("hello[MASK]world"), (Ids{2, 5, 4, 6, 3}));
  // Case-sensitive: lowercase text is ordinary punctuation and words.
  EXPECT_EQ(Encode("[sep]"), (Ids{2, 16, 18, 17, 3}));
  EXPECT_EQ(Encode("[Sep]"), (Ids{2, 16, 18, 17, 3}));
}

TEST_F(TinyTokenizerTest, InvalidUtf8IsReplacedThenDropped) {
  EXPECT_EQ(Encode("hel\xFFlo"), (Ids{2, 5, 3}));
  EXPECT_EQ(Encode("hello\xE2\x82"), (Ids{2, 5, 3}));
  EXPECT_EQ(Encode("\xC0\xAF"), (Ids{2, 3}));
  // A broken special token is not a special token.
  EXPECT_EQ(Encode("[SE\x80P]"), (Ids{2, 16, 18, 17, 3}));
}

TEST_F(TinyTokenizerTest, TruncatesToTheLimit) {
  EncodeOptions options;
  options.max_length_tokens = 5;
  auto encoding = tokenizer_->Encode("hello world hello world", options);
  ASSERT_TRUE(encoding.ok());
  EXPECT_EQ(encoding->ids, (Ids{2, 5, 6, 5, 3}));
  EXPECT_TRUE(encoding->truncated);

  // Exactly at the limit is not truncation.
  encoding = tokenizer_->Encode("hello world hello", options);
  ASSERT_TRUE(encoding.ok());
  EXPECT_EQ(encoding->ids, (Ids{2, 5, 6, 5, 3}));
  EXPECT_FALSE(encoding->truncated);

  // Truncation cuts inside a word's pieces, as HF does.
  encoding = tokenizer_->Encode("hello hello unaffable", options);
  ASSERT_TRUE(encoding.ok());
  EXPECT_EQ(encoding->ids, (Ids{2, 5, 5, 8, 3}));
  EXPECT_TRUE(encoding->truncated);
}

TEST_F(TinyTokenizerTest, WithoutTruncationTooLongIsPayloadTooLarge) {
  EncodeOptions options;
  options.max_length_tokens = 5;
  options.truncate = false;
  const auto encoding = tokenizer_->Encode("hello world hello world", options);
  ASSERT_FALSE(encoding.ok());
  EXPECT_EQ(encoding.status().code(), Status::Code::kPayloadTooLarge);
  EXPECT_NE(encoding.status().message().find("more than the limit of 5"), std::string::npos)
      << encoding.status().message();
  EXPECT_TRUE(tokenizer_->Encode("hello world hello", options).ok());
}

TEST_F(TinyTokenizerTest, RefusingATooLongTextStopsAtTheLimit) {
  // Encoding stops one piece past the limit whether the text is cut or refused, so the cost
  // of refusing a huge text is the cost of its first few tokens. The refusal therefore
  // cannot say how long the text was.
  EncodeOptions options;
  options.max_length_tokens = 5;
  options.truncate = false;
  std::string huge;
  for (int i = 0; i < 100'000; ++i) huge += "hello world ";
  const auto encoding = tokenizer_->Encode(huge, options);
  ASSERT_FALSE(encoding.ok());
  EXPECT_EQ(encoding.status().message().find("200002"), std::string::npos)
      << encoding.status().message();
  EXPECT_NE(encoding.status().message().find("limit of 5"), std::string::npos);
}

TEST_F(TinyTokenizerTest, LimitOptions) {
  EXPECT_EQ(tokenizer_->max_length(), 16);
  // 0 means the model maximum; larger values are clamped to it.
  const std::string long_text(100, '!');
  EXPECT_EQ(Encode(long_text).size(), 16u);
  EXPECT_EQ(Encode(long_text, 1000).size(), 16u);
  // Room for the special tokens only.
  EXPECT_EQ(Encode(long_text, 2), (Ids{2, 3}));
  EncodeOptions options;
  options.max_length_tokens = 1;
  EXPECT_EQ(tokenizer_->Encode("x", options).status().code(), Status::Code::kInvalidArgument);
  options.max_length_tokens = -1;
  EXPECT_EQ(tokenizer_->Encode("x", options).status().code(), Status::Code::kInvalidArgument);
}

TEST_F(TinyTokenizerTest, LongInputsAreCutExactlyAcrossChunks) {
  // ~40 KB, non-ASCII, so several chunks through the general path.
  std::string text;
  for (int i = 0; i < 2000; ++i) text += "hello caf\u00E9 World! ";
  EncodeOptions options;
  options.truncate = false;
  const auto encoding = tokenizer_->Encode(text, options);
  ASSERT_FALSE(encoding.ok());
  EXPECT_NE(encoding.status().message().find("more than the limit of 16"), std::string::npos)
      << encoding.status().message();
  const Ids ids = Encode(text);
  ASSERT_EQ(ids.size(), 16u);
  EXPECT_EQ(ids[1], 5);
  EXPECT_EQ(ids[5], 5);
}

TEST_F(TinyTokenizerTest, Accessors) {
  EXPECT_EQ(tokenizer_->pad_id(), 0);
  EXPECT_EQ(tokenizer_->vocab_size(), 19u);
  EXPECT_EQ(tokenizer_->num_special_tokens(), 2u);
  EXPECT_EQ(tokenizer_->TokenToId("[MASK]"), 4);
  EXPECT_EQ(tokenizer_->TokenToId("##aff"), 9);
  EXPECT_EQ(tokenizer_->TokenToId("nope"), -1);
}

TEST(WordPieceTokenizerTest, MaxLengthMustLeaveRoomForText) {
  const TempFile file(TinyTokenizerJson().Render());
  const auto tokenizer = WordPieceTokenizer::FromTokenizerJson(file.path(), 2);
  ASSERT_FALSE(tokenizer.ok());
  EXPECT_EQ(tokenizer.status().code(), Status::Code::kInvalidArgument);
}

TEST(WordPieceTokenizerTest, FromVocabTxt) {
  const TempFile file("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\n##s \nworld\n", ".txt");
  auto tokenizer = WordPieceTokenizer::FromVocabTxt(file.path());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
  const auto encoding = (*tokenizer)->Encode("Hellos [MASK] WORLD?", {});
  ASSERT_TRUE(encoding.ok());
  EXPECT_EQ(encoding->ids, (Ids{2, 5, 6, 4, 7, 1, 3}));
  EXPECT_EQ((*tokenizer)->max_length(), 256);

  const TempFile bad("hello\n", ".txt");
  EXPECT_FALSE(WordPieceTokenizer::FromVocabTxt(bad.path()).ok());
  EXPECT_EQ(WordPieceTokenizer::FromVocabTxt("/nonexistent/vocab.txt").status().code(),
            Status::Code::kNotFound);
}

// --- Pairs: [CLS] A [SEP] B [SEP], as cross-encoders read them. --------------------------------

// The tiny tokenizer with BERT's pair template.
std::string TinyPairTokenizerJson() {
  TinyTokenizerJson j;
  j.post_processor =
      R"({"type": "TemplateProcessing",
          "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
          "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                   {"Sequence": {"id": "A", "type_id": 0}},
                   {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
                   {"Sequence": {"id": "B", "type_id": 1}},
                   {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
          "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]},
                             "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}}})";
  return j.Render();
}

class TinyPairTokenizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const TempFile file(TinyPairTokenizerJson());
    auto tokenizer = WordPieceTokenizer::FromTokenizerJson(file.path(), 64);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
    tokenizer_ = std::move(tokenizer).value();
  }

  // `n` pieces: "hello" n times.
  static std::string Hellos(int n) {
    std::string out;
    for (int i = 0; i < n; ++i) out += "hello ";
    return out;
  }

  // How many pieces of each text an EncodePair at `max_length` keeps.
  std::pair<int, int> Kept(int first_pieces, int second_pieces, int max_length) {
    EncodeOptions options;
    options.max_length_tokens = max_length;
    auto encoding = tokenizer_->EncodePair(Hellos(first_pieces), Hellos(second_pieces), options);
    EXPECT_TRUE(encoding.ok()) << encoding.status().ToString();
    if (!encoding.ok()) return {-1, -1};
    int second = 0;
    for (const int64_t type : encoding->type_ids) second += type == 1 ? 1 : 0;
    const int first = static_cast<int>(encoding->ids.size()) - second - 2;  // [CLS], [SEP].
    return {first, second - 1};                                             // B's [SEP].
  }

  std::unique_ptr<WordPieceTokenizer> tokenizer_;
};

TEST_F(TinyPairTokenizerTest, EncodesBothTextsWithTheirTypes) {
  const auto encoding = tokenizer_->EncodePair("Hello, World!", "unaffable", {});
  ASSERT_TRUE(encoding.ok()) << encoding.status().ToString();
  EXPECT_EQ(encoding->ids, (Ids{2, 5, 13, 6, 7, 3, 8, 9, 10, 3}));
  EXPECT_EQ(encoding->type_ids, (Ids{0, 0, 0, 0, 0, 0, 1, 1, 1, 1}));
  EXPECT_FALSE(encoding->truncated);
  // Empty texts keep their places; a literal [SEP] in a text is a piece of that text.
  const auto empty = tokenizer_->EncodePair("", "[SEP]", {});
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->ids, (Ids{2, 3, 3, 3}));
  EXPECT_EQ(empty->type_ids, (Ids{0, 0, 1, 1}));
  // Single texts are unchanged and carry no types.
  const auto single = tokenizer_->Encode("hello", {});
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(single->ids, (Ids{2, 5, 3}));
  EXPECT_TRUE(single->type_ids.empty());
}

// Hugging Face's "longest_first" (checked against tokenizers 0.23 for every pair of lengths
// under 45 at limits 3-17 and 64): the longer text is cut first; once both are over half of
// the room the shorter keeps room / 2 and the longer the rest, the second counting as the
// longer on a tie.
TEST_F(TinyPairTokenizerTest, CutsTheLongerTextFirst) {
  // max_length 8: room for 5 pieces beside [CLS] [SEP] [SEP].
  EXPECT_EQ(Kept(4, 1, 8), std::make_pair(4, 1));  // Fits.
  EXPECT_EQ(Kept(6, 1, 8), std::make_pair(4, 1));
  EXPECT_EQ(Kept(1, 9, 8), std::make_pair(1, 4));
  EXPECT_EQ(Kept(6, 4, 8), std::make_pair(3, 2));
  EXPECT_EQ(Kept(4, 6, 8), std::make_pair(2, 3));
  EXPECT_EQ(Kept(4, 4, 8), std::make_pair(2, 3));  // A tie: the second keeps the extra one.
  EXPECT_EQ(Kept(2, 2, 6), std::make_pair(1, 2));
  EXPECT_EQ(Kept(3, 2, 6), std::make_pair(2, 1));
  // Both over the whole room: which one is longer still decides, however long they are.
  EXPECT_EQ(Kept(50, 40, 8), std::make_pair(3, 2));
  EXPECT_EQ(Kept(40, 50, 8), std::make_pair(2, 3));
  EXPECT_EQ(Kept(50, 50, 8), std::make_pair(2, 3));
  EXPECT_EQ(Kept(50, 40, 9), std::make_pair(3, 3));  // Even room: halves.
  EXPECT_EQ(Kept(0, 0, 3), std::make_pair(0, 0));
  EXPECT_EQ(Kept(2, 0, 3), std::make_pair(0, 0));

  EncodeOptions options;
  options.max_length_tokens = 8;
  const auto cut = tokenizer_->EncodePair(Hellos(6), Hellos(4), options);
  ASSERT_TRUE(cut.ok());
  EXPECT_TRUE(cut->truncated);
  EXPECT_EQ(cut->ids.size(), 8u);
  const auto fits = tokenizer_->EncodePair(Hellos(4), Hellos(1), options);
  ASSERT_TRUE(fits.ok());
  EXPECT_FALSE(fits->truncated);
}

TEST_F(TinyPairTokenizerTest, LimitsAndRefusals) {
  EncodeOptions options;
  options.max_length_tokens = 8;
  options.truncate = false;
  const auto refused = tokenizer_->EncodePair(Hellos(3), Hellos(3), options);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Status::Code::kPayloadTooLarge);
  EXPECT_NE(refused.status().message().find("limit of 8"), std::string::npos)
      << refused.status().message();
  EXPECT_TRUE(tokenizer_->EncodePair(Hellos(3), Hellos(2), options).ok());

  options.truncate = true;
  options.max_length_tokens = 2;  // Under the pair form's three special tokens.
  const auto too_small = tokenizer_->EncodePair("a", "b", options);
  ASSERT_FALSE(too_small.ok());
  EXPECT_EQ(too_small.status().code(), Status::Code::kInvalidArgument);
  options.max_length_tokens = -1;
  EXPECT_EQ(tokenizer_->EncodePair("a", "b", options).status().code(),
            Status::Code::kInvalidArgument);
  // Above the model's limit is clamped to it.
  options.max_length_tokens = 1000;
  const auto clamped = tokenizer_->EncodePair(Hellos(100), Hellos(100), options);
  ASSERT_TRUE(clamped.ok());
  EXPECT_EQ(clamped->ids.size(), 64u);
}

TEST_F(TinyPairTokenizerTest, InvalidUtf8InEitherTextIsReplacedThenDropped) {
  const auto encoding = tokenizer_->EncodePair("hel\xFFlo", "wor\xE2\x82", {});
  ASSERT_TRUE(encoding.ok());
  EXPECT_EQ(encoding->ids, (Ids{2, 5, 3, 1, 3}));  // "wor" is not in the tiny vocabulary.
}

TEST(WordPieceTokenizerTest, WithoutAPairTemplatePairsAreRefused) {
  const TempFile file(TinyTokenizerJson().Render());  // Its "pair" template is empty.
  auto tokenizer = WordPieceTokenizer::FromTokenizerJson(file.path(), 16);
  ASSERT_TRUE(tokenizer.ok());
  EXPECT_TRUE((*tokenizer)->Encode("hello", {}).ok());
  const auto pair = (*tokenizer)->EncodePair("hello", "world", {});
  ASSERT_FALSE(pair.ok());
  EXPECT_EQ(pair.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(pair.status().message().find("no pair form"), std::string::npos)
      << pair.status().message();
}

TEST(WordPieceTokenizerTest, VocabTxtEncodesPairsAsBert) {
  const TempFile file("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\n##s \nworld\n", ".txt");
  auto tokenizer = WordPieceTokenizer::FromVocabTxt(file.path());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
  const auto encoding = (*tokenizer)->EncodePair("hellos", "world", {});
  ASSERT_TRUE(encoding.ok());
  EXPECT_EQ(encoding->ids, (Ids{2, 5, 6, 3, 7, 3}));
  EXPECT_EQ(encoding->type_ids, (Ids{0, 0, 0, 0, 1, 1}));
}

// --- The real all-MiniLM-L6-v2 tokenizer. ---------------------------------------------------

class RealModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path = ::tailcut::testing::ModelTokenizerJson();
    if (!std::filesystem::exists(path)) {
      GTEST_SKIP() << "model tokenizer not found at " << path
                   << " (set TAILCUT_MODEL_DIR to the all-MiniLM-L6-v2 folder)";
    }
    auto tokenizer = WordPieceTokenizer::FromTokenizerJson(path);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
    tokenizer_ = std::move(tokenizer).value();
  }

  Ids Encode(std::string_view text) {
    auto encoding = tokenizer_->Encode(text, {});
    EXPECT_TRUE(encoding.ok());
    return encoding.ok() ? encoding->ids : Ids{};
  }

  std::unique_ptr<WordPieceTokenizer> tokenizer_;
};

// Expected ids from Hugging Face tokenizers (Tokenizer.from_file(...).encode(text).ids).
TEST_F(RealModelTest, MatchesHuggingFace) {
  EXPECT_EQ(tokenizer_->vocab_size(), 30522u);
  EXPECT_EQ(tokenizer_->pad_id(), 0);
  EXPECT_EQ(tokenizer_->max_length(), 256);
  EXPECT_EQ(Encode("Hello, World!"), (Ids{101, 7592, 1010, 2088, 999, 102}));
  EXPECT_EQ(Encode("[SEP]x"), (Ids{101, 102, 1060, 102}));
  EXPECT_EQ(Encode("[sep]"), (Ids{101, 1031, 19802, 1033, 102}));
  EXPECT_EQ(Encode("x[MASK]y"), (Ids{101, 1060, 103, 1061, 102}));
  EXPECT_EQ(Encode("a\vb"), (Ids{101, 11113, 102}));
  EXPECT_EQ(Encode("\u0391\u03A3"), (Ids{101, 1155, 29733, 102}));
  EXPECT_EQ(Encode("\u0130stanbul"), (Ids{101, 9960, 102}));
  EXPECT_EQ(Encode("\uD55C\uAD6D\uC5B4"),
            (Ids{101, 1469, 30006, 30021, 29991, 30014, 30020, 29999, 30008, 102}));
  EXPECT_EQ(Encode("x\u200Bx"), (Ids{101, 22038, 102}));
  EXPECT_EQ(Encode(std::string(101, 'a')), (Ids{101, 100, 102}));
  EXPECT_EQ(Encode(std::string(100, 'a')).size(), 52u);
}

TEST_F(RealModelTest, TruncatesTo256) {
  std::string text;
  for (int i = 0; i < 300; ++i) text += "word ";
  const auto encoding = tokenizer_->Encode(text, {});
  ASSERT_TRUE(encoding.ok());
  EXPECT_EQ(encoding->ids.size(), 256u);
  EXPECT_TRUE(encoding->truncated);
  EXPECT_EQ(encoding->ids.front(), 101);
  EXPECT_EQ(encoding->ids.back(), 102);
  EncodeOptions strict;
  strict.truncate = false;
  const auto error = tokenizer_->Encode(text, strict);
  ASSERT_FALSE(error.ok());
  EXPECT_NE(error.status().message().find("more than the limit of 256 tokens"), std::string::npos)
      << error.status().message();
}

TEST_F(RealModelTest, VocabTxtGivesTheSameIds) {
  const std::string vocab = ::tailcut::testing::ModelDir() + "/vocab.txt";
  if (!std::filesystem::exists(vocab)) GTEST_SKIP() << "no vocab.txt beside tokenizer.json";
  auto from_txt = WordPieceTokenizer::FromVocabTxt(vocab);
  ASSERT_TRUE(from_txt.ok()) << from_txt.status().ToString();
  for (const char* text : {"Hello, World!", "x[MASK]y [sep] [SEP]", "Caf\u00E9 \u4E2D\u6587 \uD55C",
                           "unaffable pneumonoultramicroscopic"}) {
    const auto a = (*from_txt)->Encode(text, {});
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(a->ids, Encode(text)) << text;
  }
}

TEST_F(RealModelTest, ConcurrentEncodesAgreeWithSequentialOnes) {
  std::vector<std::string> texts;
  for (int i = 0; i < 200; ++i) {
    texts.push_back("Question " + std::to_string(i) + ": why is caf\u00E9 \u4E2D\u6587 " +
                    std::string(static_cast<size_t>(i % 7), '!') + " so popular?");
  }
  std::vector<Ids> expected;
  for (const auto& t : texts) expected.push_back(Encode(t));
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int round = 0; round < 20; ++round) {
        for (size_t i = 0; i < texts.size(); ++i) {
          const auto encoding = tokenizer_->Encode(texts[i], {});
          if (!encoding.ok() || encoding->ids != expected[i]) ++mismatches;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

}  // namespace
}  // namespace tailcut
