#include "engine/model_config.h"

#include <gtest/gtest.h>

#include <fstream>

#include "tests/engine/test_paths.h"

namespace tailcut {
namespace {

TEST(ModelConfigTest, ReadsTheDefaultModel) {
  auto c = LoadModelConfig(testing::ModelDir());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->name, "all-MiniLM-L6-v2");
  EXPECT_EQ(c->kind, ModelKind::kTextEmbedding);
  EXPECT_EQ(c->max_sequence_length, 256);
  EXPECT_TRUE(c->normalize);
}

TEST(ModelConfigTest, BareOnnxFileIsATensorModelNamedAfterItsFolder) {
  auto dir = testing::TempDir("bare") / "classifier";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "model.onnx") << "x";
  auto c = LoadModelConfig(dir.string());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->name, "classifier");
  EXPECT_EQ(c->kind, ModelKind::kTensor);
}

TEST(ModelConfigTest, BadValuesNameTheKey) {
  auto dir = testing::TempDir("badcfg");
  std::ofstream(dir / "model.yaml") << "name: x\nkind: text-embedding\ntokenizer: t.json\n"
                                       "max_sequence_length: lots\n";
  auto c = LoadModelConfig(dir.string());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("max_sequence_length"), std::string::npos);

  std::ofstream(dir / "model.yaml") << "kind: sound\n";
  c = LoadModelConfig(dir.string());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("kind 'sound'"), std::string::npos);

  std::ofstream(dir / "model.yaml") << "kind: text-embedding\n";
  c = LoadModelConfig(dir.string());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("needs 'tokenizer'"), std::string::npos);

  std::ofstream(dir / "model.yaml") << "{ unbalanced";
  c = LoadModelConfig(dir.string());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("cannot parse"), std::string::npos);
}

TEST(ModelConfigTest, VariantsCarryBatchInvarianceAndFidelity) {
  auto dir = testing::TempDir("fidelity");
  const std::string head =
      "name: x\nkind: tensor\nvariants:\n"
      "  - {name: fp32, file: model.onnx, precision: fp32,"
      " batch_invariant: true, fidelity_min_cosine: 1.0,"
      " fidelity_recall_at_10: 1.0}\n";
  std::ofstream(dir / "model.yaml")
      << head
      << "  - {name: q, file: q.onnx, precision: int8, batch_invariant: true,"
         " fidelity_min_cosine: 0.9951, fidelity_recall_at_10: 0.987}\n"
         "  - {name: d, file: d.onnx, precision: int8}\n";
  auto c = LoadModelConfig(dir.string());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->variants.size(), 3u);
  EXPECT_TRUE(c->variants[1].batch_invariant);
  EXPECT_DOUBLE_EQ(*c->variants[1].fidelity_min_cosine, 0.9951);
  EXPECT_DOUBLE_EQ(*c->variants[1].fidelity_recall_at_10, 0.987);
  // Unstated means unknown: not batch-invariant, no measured fidelity.
  EXPECT_FALSE(c->variants[2].batch_invariant);
  EXPECT_FALSE(c->variants[2].fidelity_min_cosine.has_value());

  std::ofstream(dir / "model.yaml")
      << head << "  - {name: q, file: q.onnx, precision: int8, fidelity_recall_at_10: 1.5}\n";
  c = LoadModelConfig(dir.string());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("'fidelity_recall_at_10' must be between 0 and 1"),
            std::string::npos)
      << c.status().message();
  std::ofstream(dir / "model.yaml")
      << head << "  - {name: q, file: q.onnx, precision: int8, batch_invariant: maybe}\n";
  c = LoadModelConfig(dir.string());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("batch_invariant"), std::string::npos);
}

TEST(ModelConfigTest, MissingFolderIsNotFound) {
  auto c = LoadModelConfig("/nonexistent/model/folder");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Status::Code::kNotFound);
}

}  // namespace
}  // namespace tailcut
