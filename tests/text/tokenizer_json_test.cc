#include "text/tokenizer_json.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "test_util.h"
#include "text/wordpiece_tokenizer.h"

namespace tailcut {
namespace {

using ::tailcut::testing::TempFile;
using ::tailcut::testing::TinyTokenizerJson;

// The error of loading `json` from a file, which must fail and name the file.
Status LoadError(const std::string& json) {
  const TempFile file(json);
  auto tokenizer = WordPieceTokenizer::FromTokenizerJson(file.path());
  EXPECT_FALSE(tokenizer.ok());
  if (tokenizer.ok()) return Status::Ok();
  EXPECT_NE(tokenizer.status().message().find(file.path()), std::string::npos)
      << tokenizer.status().ToString();
  return tokenizer.status();
}

bool Contains(const Status& s, std::string_view what) {
  return s.message().find(what) != std::string::npos;
}

TEST(TokenizerJsonTest, ParsesTheBertPipeline) {
  auto spec = ParseTokenizerJson(TinyTokenizerJson().Render(), "tiny");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_TRUE(spec->normalizer.lowercase);
  EXPECT_TRUE(spec->normalizer.strip_accents);  // null follows lowercase.
  EXPECT_EQ(spec->wordpiece.unk_token, "[UNK]");
  EXPECT_EQ(spec->wordpiece.max_input_chars_per_word, 100u);
  EXPECT_EQ(spec->vocab.size(), 19u);
  EXPECT_EQ(spec->added_tokens.size(), 5u);
  EXPECT_EQ(spec->prefix_ids, std::vector<int64_t>{2});
  EXPECT_EQ(spec->suffix_ids, std::vector<int64_t>{3});
  EXPECT_EQ(spec->pad_id, 0);
}

TEST(TokenizerJsonTest, StripAccentsNullFollowsLowercase) {
  TinyTokenizerJson j;
  j.normalizer = R"({"type": "BertNormalizer", "lowercase": false, "strip_accents": null})";
  auto spec = ParseTokenizerJson(j.Render(), "tiny");
  ASSERT_TRUE(spec.ok());
  EXPECT_FALSE(spec->normalizer.strip_accents);
  j.normalizer = R"({"type": "BertNormalizer", "lowercase": false, "strip_accents": true})";
  spec = ParseTokenizerJson(j.Render(), "tiny");
  ASSERT_TRUE(spec.ok());
  EXPECT_TRUE(spec->normalizer.strip_accents);
}

TEST(TokenizerJsonTest, BertProcessingIsAccepted) {
  TinyTokenizerJson j;
  j.post_processor = R"({"type": "BertProcessing", "sep": ["[SEP]", 3], "cls": ["[CLS]", 2]})";
  auto spec = ParseTokenizerJson(j.Render(), "tiny");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->prefix_ids, std::vector<int64_t>{2});
  EXPECT_EQ(spec->suffix_ids, std::vector<int64_t>{3});
}

TEST(TokenizerJsonTest, BertProcessingHasBertsPairForm) {
  TinyTokenizerJson j;
  j.post_processor = R"({"type": "BertProcessing", "sep": ["[SEP]", 3], "cls": ["[CLS]", 2]})";
  auto spec = ParseTokenizerJson(j.Render(), "tiny");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  ASSERT_TRUE(spec->pair.has_value());
  EXPECT_EQ(spec->pair->before_a_ids, std::vector<int64_t>{2});
  EXPECT_EQ(spec->pair->between_ids, std::vector<int64_t>{3});
  EXPECT_EQ(spec->pair->after_b_ids, std::vector<int64_t>{3});
  EXPECT_EQ(spec->pair->after_b_types, std::vector<int64_t>{1});
  EXPECT_EQ(spec->pair->b_type, 1);
}

// A TemplateProcessing whose "pair" is `pair` (JSON); the rest as in the tiny tokenizer.
std::string WithPairTemplate(const std::string& pair) {
  TinyTokenizerJson j;
  j.post_processor = R"({"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                 {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
      "pair": )" + pair +
                     R"(,
      "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]},
                         "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}}})";
  return j.Render();
}

TEST(TokenizerJsonTest, PairTemplateIsParsedWithItsTypes) {
  auto spec =
      ParseTokenizerJson(WithPairTemplate(R"([{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                           {"Sequence": {"id": "A", "type_id": 0}},
                           {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
                           {"SpecialToken": {"id": "[SEP]", "type_id": 1}},
                           {"Sequence": {"id": "B", "type_id": 1}},
                           {"SpecialToken": {"id": "[SEP]", "type_id": 1}}])"),
                         "tiny");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  ASSERT_TRUE(spec->pair.has_value());
  EXPECT_EQ(spec->pair->before_a_ids, std::vector<int64_t>{2});
  EXPECT_EQ(spec->pair->between_ids, (std::vector<int64_t>{3, 3}));  // RoBERTa-like </s></s>.
  EXPECT_EQ(spec->pair->between_types, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(spec->pair->after_b_ids, std::vector<int64_t>{3});
  EXPECT_EQ(spec->pair->num_special_tokens(), 4u);
  EXPECT_EQ(spec->pair->a_type, 0);
  EXPECT_EQ(spec->pair->b_type, 1);
}

TEST(TokenizerJsonTest, PairTemplatesOfAnotherFormLeavePairsUnsupported) {
  for (const char* pair : {
           R"([])",
           R"([{"Sequence": {"id": "B", "type_id": 1}}, {"Sequence": {"id": "A", "type_id": 0}}])",
           R"([{"Sequence": {"id": "A", "type_id": 0}}])",
           R"([{"Sequence": {"id": "A"}}, {"Sequence": {"id": "A"}}, {"Sequence": {"id": "B"}}])",
           R"([{"Sequence": {"id": "A"}}, {"Other": {}}, {"Sequence": {"id": "B"}}])",
       }) {
    auto spec = ParseTokenizerJson(WithPairTemplate(pair), "tiny");
    ASSERT_TRUE(spec.ok()) << pair << ": " << spec.status().ToString();
    EXPECT_FALSE(spec->pair.has_value()) << pair;
  }
}

TEST(TokenizerJsonTest, BrokenPairTemplateIsAnError) {
  Status s = LoadError(WithPairTemplate(
      R"([{"Sequence": {"id": "A"}}, {"SpecialToken": {"id": "[EOS]"}}, {"Sequence": {"id": "B"}}])"));
  EXPECT_TRUE(Contains(s, "[EOS]")) << s.ToString();
  s = LoadError(WithPairTemplate(
      R"([{"Sequence": {"id": "A", "type_id": "one"}}, {"Sequence": {"id": "B"}}])"));
  EXPECT_TRUE(Contains(s, "bad type_id")) << s.ToString();
}

TEST(TokenizerJsonTest, MissingFileIsNotFoundAndNamesIt) {
  auto tokenizer = WordPieceTokenizer::FromTokenizerJson("/nonexistent/dir/tokenizer.json");
  ASSERT_FALSE(tokenizer.ok());
  EXPECT_EQ(tokenizer.status().code(), Status::Code::kNotFound);
  EXPECT_TRUE(Contains(tokenizer.status(), "/nonexistent/dir/tokenizer.json"));
}

TEST(TokenizerJsonTest, DirectoryInsteadOfFileIsAnError) {
  const std::string dir = std::filesystem::temp_directory_path().string();
  auto tokenizer = WordPieceTokenizer::FromTokenizerJson(dir);
  ASSERT_FALSE(tokenizer.ok());
  EXPECT_TRUE(Contains(tokenizer.status(), "'" + dir + "' is a directory"))
      << tokenizer.status().ToString();
}

TEST(TokenizerJsonTest, CorruptJsonIsInvalid) {
  const Status s = LoadError(R"({"model": {"type": "WordPiece", "vocab": {"a": 1,)");
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(s, "not valid JSON"));
  EXPECT_TRUE(Contains(LoadError(""), "not valid JSON"));
  EXPECT_TRUE(Contains(LoadError("[1, 2]"), "not a JSON object"));
}

TEST(TokenizerJsonTest, UnsupportedComponentsAreRefusedByName) {
  TinyTokenizerJson j;
  j.model_type = "BPE";
  Status s = LoadError(j.Render());
  EXPECT_TRUE(Contains(s, "model type 'BPE'")) << s.ToString();
  EXPECT_TRUE(Contains(s, "not supported"));

  j = TinyTokenizerJson();
  j.normalizer = R"({"type": "NFKC"})";
  EXPECT_TRUE(Contains(LoadError(j.Render()), "normalizer type 'NFKC'"));

  j = TinyTokenizerJson();
  j.pre_tokenizer = R"({"type": "Whitespace"})";
  EXPECT_TRUE(Contains(LoadError(j.Render()), "pre_tokenizer type 'Whitespace'"));

  j = TinyTokenizerJson();
  j.pre_tokenizer = "null";
  EXPECT_TRUE(Contains(LoadError(j.Render()), "pre_tokenizer"));

  j = TinyTokenizerJson();
  j.post_processor = R"({"type": "RobertaProcessing"})";
  EXPECT_TRUE(Contains(LoadError(j.Render()), "post_processor type 'RobertaProcessing'"));

  j = TinyTokenizerJson();
  j.added_tokens = R"([{"id": 1, "content": "[UNK]", "normalized": true, "special": true}])";
  EXPECT_TRUE(Contains(LoadError(j.Render()), "added token '[UNK]' with normalized=true"));

  j = TinyTokenizerJson();
  j.added_tokens = R"([{"id": 1, "content": "[UNK]", "lstrip": true}])";
  EXPECT_TRUE(Contains(LoadError(j.Render()), "lstrip=true"));
}

TEST(TokenizerJsonTest, BrokenModelsAreInvalid) {
  TinyTokenizerJson j;
  j.vocab = R"({"a": 0})";
  EXPECT_TRUE(Contains(LoadError(j.Render()), "'[UNK]' is not in the vocab"));
  j.vocab = R"({"[UNK]": "zero"})";
  EXPECT_TRUE(Contains(LoadError(j.Render()), "vocab id of '[UNK]'"));
  j.vocab = R"({"[UNK]": 4294967296})";
  EXPECT_TRUE(Contains(LoadError(j.Render()), "vocab id of '[UNK]'"));
  j.vocab = "{}";
  EXPECT_TRUE(Contains(LoadError(j.Render()), "no \"vocab\""));
  EXPECT_TRUE(
      Contains(LoadError(R"({"normalizer": null, "pre_tokenizer": {"type": "BertPreTokenizer"}})"),
               "no \"model\""));
}

}  // namespace
}  // namespace tailcut
