// The default model through tailcut's own tokenizer and engine reproduces the reference
// embeddings that the original PyTorch sentence-transformers model produced
// (tests/data/golden_minilm.json, made by tools/make_golden.py), alone and in batches.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "engine/model_config.h"
#include "engine/text_embedding_model.h"
#include "tests/engine/test_paths.h"

namespace tailcut {
namespace {

double Cosine(std::span<const float> a, std::span<const float> b) {
  double dot = 0, na = 0, nb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    dot += static_cast<double>(a[i]) * b[i];
    na += static_cast<double>(a[i]) * a[i];
    nb += static_cast<double>(b[i]) * b[i];
  }
  return dot / std::sqrt(na * nb);
}

class GoldenTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto config = LoadModelConfig(testing::ModelDir());
    ASSERT_TRUE(config.ok()) << config.status().ToString()
                             << " (run scripts/setup.sh to export the default model)";
    auto m = TextEmbeddingModel::Load(*config, OnnxSessionOptions{});
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    model_ = std::move(m).value().release();

    std::ifstream in(testing::SourcePath("tests/data/golden_minilm.json"));
    ASSERT_TRUE(in) << "tests/data/golden_minilm.json is missing";
    golden_ = new nlohmann::json(nlohmann::json::parse(in));
  }
  static void TearDownTestSuite() {
    delete model_;
    delete golden_;
  }

  static TextEmbeddingModel* model_;
  static nlohmann::json* golden_;
};
TextEmbeddingModel* GoldenTest::model_ = nullptr;
nlohmann::json* GoldenTest::golden_ = nullptr;

TEST_F(GoldenTest, EveryReferenceEmbeddingIsReproducedAlone) {
  const auto& items = (*golden_)["items"];
  ASSERT_GE(items.size(), 50u);
  double worst = 1.0;
  for (const auto& item : items) {
    const std::string text = item["text"].get<std::string>();
    const std::vector<float> expected = item["embedding"].get<std::vector<float>>();
    auto got = model_->EmbedTexts({text});
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ((*got)[0].size(), expected.size());
    const double cos = Cosine((*got)[0], expected);
    worst = std::min(worst, cos);
    EXPECT_GE(cos, 0.9999) << "text: " << text.substr(0, 80);
  }
  std::cout << "worst cosine vs reference over " << items.size() << " texts: " << worst << "\n";
}

TEST_F(GoldenTest, BatchingDoesNotChangeResults) {
  const auto& items = (*golden_)["items"];
  std::vector<std::string> texts;
  for (const auto& item : items) texts.push_back(item["text"].get<std::string>());
  std::vector<std::vector<float>> alone;
  for (const auto& t : texts) {
    auto r = model_->EmbedTexts({t});
    ASSERT_TRUE(r.ok());
    alone.push_back((*r)[0]);
  }
  // Shuffled batches of several sizes mix short texts with long, padded ones.
  std::mt19937 rng(7);
  for (size_t batch : {2u, 5u, 16u, 64u}) {
    std::vector<size_t> order(texts.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t start = 0; start < order.size(); start += batch) {
      std::vector<std::string> chunk;
      for (size_t i = start; i < std::min(order.size(), start + batch); ++i) {
        chunk.push_back(texts[order[i]]);
      }
      auto r = model_->EmbedTexts(chunk);
      ASSERT_TRUE(r.ok());
      for (size_t i = 0; i < chunk.size(); ++i) {
        EXPECT_GE(Cosine((*r)[i], alone[order[start + i]]), 0.99999)
            << "batch " << batch << " text: " << chunk[i].substr(0, 60);
      }
    }
  }
}

TEST_F(GoldenTest, EmbeddingsAreUnitLength) {
  auto r = model_->EmbedTexts({"unit length", ""});
  ASSERT_TRUE(r.ok());
  for (const auto& v : *r) {
    double n = 0;
    for (float x : v) n += static_cast<double>(x) * x;
    EXPECT_NEAR(std::sqrt(n), 1.0, 1e-5);
  }
}

}  // namespace
}  // namespace tailcut
