#include "engine/model_config.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <utility>
#include <vector>

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

TEST(ModelConfigTest, BareGgufFileIsAGenerativeModelNamedAfterItsFolder) {
  auto dir = testing::TempDir("baregguf") / "chat";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tiny.Q4_1.gguf") << "x";
  auto c = LoadModelConfig(dir.string());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->name, "chat");
  EXPECT_EQ(c->kind, ModelKind::kGenerative);
  EXPECT_EQ(c->file_path, (dir / "tiny.Q4_1.gguf").string());
  ASSERT_EQ(c->variants.size(), 1u);
  EXPECT_EQ(c->variants[0].name, "tiny.Q4_1");
  EXPECT_EQ(c->default_variant, "tiny.Q4_1");
  EXPECT_EQ(c->generation.context_tokens, GenerativeConfig{}.context_tokens);

  // Two GGUF files and no model.yaml to choose: an error that says so, not a guess.
  std::ofstream(dir / "other.gguf") << "x";
  c = LoadModelConfig(dir.string());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("2 .gguf files"), std::string::npos);
}

TEST(ModelConfigTest, GenerativeModelYamlReadsFileAndGenerationOptions) {
  auto dir = testing::TempDir("genyaml");
  std::ofstream(dir / "a.gguf") << "x";
  std::ofstream(dir / "b.gguf") << "x";
  std::ofstream(dir / "model.yaml") << "name: smol\nkind: generative\nfile: b.gguf\n"
                                       "context_tokens: 512\nmax_sequences: 3\n"
                                       "batch_tokens: 128\nprefill_chunk_tokens: 64\n"
                                       "max_waiting_requests: 5\nmax_queue_delay_millis: 250\n"
                                       "thread_poll_level: 50\n"
                                       "target_time_to_first_token_millis: 300\n"
                                       "inter_token_slo_millis: 100\nslow_gaps_per_mille: 0\n";
  auto c = LoadModelConfig(dir.string());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->kind, ModelKind::kGenerative);
  EXPECT_EQ(ModelKindName(c->kind), "generative");
  EXPECT_EQ(c->file_path, (dir / "b.gguf").string());
  EXPECT_EQ(c->generation.context_tokens, 512);
  EXPECT_EQ(c->generation.max_sequences, 3);
  EXPECT_EQ(c->generation.batch_tokens, 128);
  EXPECT_EQ(c->generation.prefill_chunk_tokens, 64);
  EXPECT_EQ(c->generation.max_waiting_requests, 5);
  EXPECT_EQ(c->generation.max_queue_delay_millis, 250);
  EXPECT_EQ(c->generation.thread_poll_level, 50);
  EXPECT_EQ(c->generation.target_time_to_first_token_millis, 300);
  EXPECT_EQ(c->generation.inter_token_slo_millis, 100);
  EXPECT_EQ(c->generation.slow_gaps_per_mille, 0);

  std::ofstream(dir / "model.yaml") << "kind: generative\nfile: a.gguf\nmax_sequences: 0\n";
  c = LoadModelConfig(dir.string());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("max_sequences must be at least 1"), std::string::npos);

  std::ofstream(dir / "model.yaml") << "kind: generative\n";  // Two files, none named.
  c = LoadModelConfig(dir.string());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("name one with 'file:'"), std::string::npos);

  std::ofstream(dir / "model.yaml") << "kind: generative\nfile: a.gguf\n"
                                       "variants: [{name: q, file: q.gguf}]\n";
  c = LoadModelConfig(dir.string());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("'variants' or 'file', not both"), std::string::npos);
}

TEST(ModelConfigTest, GenerativeVariantsAndPrecisionPolicy) {
  auto dir = testing::TempDir("genvariants");
  std::ofstream(dir / "model.yaml")
      << "name: smol\nkind: generative\n"
         "variants:\n"
         "  - {name: q4_1, file: m.Q4_1.gguf, precision: q4_1, perplexity: 18.346}\n"
         "  - {name: q8_0, file: m.Q8_0.gguf, precision: q8_0, perplexity: 18.354}\n"
         "  - {name: raw, file: m.F16.gguf}\n"
         "default_variant: q4_1\n"
         "precision: {mode: prefill, prefill_variant: q8_0, degrade_at_prefill_percent: 80,\n"
         "            restore_below_prefill_percent: 50, min_dwell_millis: 2000}\n";
  auto c = LoadModelConfig(dir.string());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->variants.size(), 3u);
  EXPECT_EQ(c->default_variant, "q4_1");
  EXPECT_EQ(c->file_path, (dir / "m.Q4_1.gguf").string());
  EXPECT_EQ(c->variants[1].name, "q8_0");
  EXPECT_EQ(c->variants[1].precision, "q8_0");
  EXPECT_EQ(c->variants[1].file_path, (dir / "m.Q8_0.gguf").string());
  ASSERT_TRUE(c->variants[1].perplexity.has_value());
  EXPECT_DOUBLE_EQ(*c->variants[1].perplexity, 18.354);
  EXPECT_FALSE(c->variants[2].perplexity.has_value());
  const GenerativePrecisionConfig& p = c->generation.precision;
  EXPECT_EQ(p.mode, "prefill");
  EXPECT_EQ(p.prefill_variant, "q8_0");
  EXPECT_EQ(p.degrade_at_prefill_percent, 80);
  EXPECT_EQ(p.restore_below_prefill_percent, 50);
  EXPECT_EQ(p.min_dwell_millis, 2000);
  EXPECT_EQ(p.window_seconds, GenerativePrecisionConfig{}.window_seconds);

  for (const auto& [yaml, error] : std::vector<std::pair<std::string, std::string>>{
           {"default_variant: nope\n", "default_variant 'nope'"},
           {"precision: {mode: fast}\n", "precision.mode 'fast'"},
           {"precision: {degrade_at_prefill_percent: 50, restore_below_prefill_percent: 70}\n",
            "hysteresis"},
           {"precision: {window_secs: 3}\n", "precision.window_secs is not a known key"},
       }) {
    std::ofstream(dir / "model.yaml") << "kind: generative\nvariants: [{name: a, file: a.gguf},"
                                         " {name: b, file: b.gguf}]\n"
                                      << yaml;
    c = LoadModelConfig(dir.string());
    ASSERT_FALSE(c.ok()) << yaml;
    EXPECT_NE(c.status().message().find(error), std::string::npos) << c.status().message();
  }
  std::ofstream(dir / "model.yaml") << "kind: generative\nvariants: [{name: a, file: a.gguf},"
                                       " {name: a, file: b.gguf}]\n";
  c = LoadModelConfig(dir.string());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("used twice"), std::string::npos);
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

TEST(ModelConfigTest, ARerankerIsATextModelWhoseScoresAreNeverNormalized) {
  auto dir = testing::TempDir("reranker");
  std::ofstream(dir / "model.yaml") << "name: rr\nkind: reranker\ntokenizer: tokenizer.json\n"
                                       "output: logit\n";
  auto c = LoadModelConfig(dir.string());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->kind, ModelKind::kReranker);
  EXPECT_TRUE(IsTextModel(c->kind));
  EXPECT_EQ(ModelKindName(c->kind), "reranker");
  EXPECT_FALSE(c->normalize);  // Off whatever the text-embedding default is.
  EXPECT_EQ(c->tokenizer_path, (dir / "tokenizer.json").string());

  std::ofstream(dir / "model.yaml") << "name: rr\nkind: reranker\ntokenizer: t.json\n"
                                       "normalize: true\n";
  c = LoadModelConfig(dir.string());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("normalize"), std::string::npos);

  std::ofstream(dir / "model.yaml") << "name: rr\nkind: reranker\n";
  c = LoadModelConfig(dir.string());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("a reranker model needs 'tokenizer'"), std::string::npos)
      << c.status().message();
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
  EXPECT_FALSE(c->variants[2].top1_agreement.has_value());

  // A classifier's variants: top-1 agreement with fp32 and top-1 accuracy on labelled images.
  std::ofstream(dir / "model.yaml")
      << head
      << "  - {name: q, file: q.onnx, precision: int8, batch_invariant: true,"
         " top1_accuracy: 0.9, top1_agreement: 0.9861}\n";
  c = LoadModelConfig(dir.string());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_DOUBLE_EQ(*c->variants[1].top1_agreement, 0.9861);
  EXPECT_DOUBLE_EQ(*c->variants[1].top1_accuracy, 0.9);
  std::ofstream(dir / "model.yaml")
      << head << "  - {name: q, file: q.onnx, precision: int8, top1_agreement: 2}\n";
  c = LoadModelConfig(dir.string());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("'top1_agreement' must be between 0 and 1"),
            std::string::npos)
      << c.status().message();

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
