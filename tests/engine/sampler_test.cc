// Sampler on hand-made logits rows: greedy picks, seeded draws, the filters, the penalties,
// log-probabilities and parameter checks. No model needed.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <vector>

#include "engine/sampler.h"

namespace tailcut {
namespace {

std::unique_ptr<Sampler> Make(const SamplingParams& p) {
  auto s = CreateSampler(p);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(s).value() : nullptr;
}

TEST(SamplerTest, TemperatureZeroIsGreedyWithTheLowestIdOnATie) {
  SamplingParams p;
  p.temperature = 0.0f;
  auto s = Make(p);
  std::vector<float> logits = {0.1f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(s->Sample(logits).token, 1);
  EXPECT_EQ(s->Sample(logits).token, 1);
}

TEST(SamplerTest, LogprobIsTheRawLogSoftmax) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.compute_logprob = true;
  p.frequency_penalty = 1.0f;  // Penalties change the pick, not the reported distribution.
  auto s = Make(p);
  std::vector<float> logits = {1.0f, 2.0f, 3.0f};
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  SampledToken t = s->Sample(logits);
  EXPECT_EQ(t.token, 2);
  EXPECT_NEAR(t.logprob, 3.0 - std::log(z), 1e-5);
  // Picked once: its logit is now 3 - 1 = 2, tied with token 1, which has the lower id.
  t = s->Sample(logits);
  EXPECT_EQ(t.token, 1);
  EXPECT_NEAR(t.logprob, 2.0 - std::log(z), 1e-5);
}

TEST(SamplerTest, PresencePenaltyCountsATokenOnce) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.presence_penalty = 1.5f;
  auto s = Make(p);
  std::vector<float> logits = {0.0f, 1.0f, 0.0f};
  s->Accept(1);
  s->Accept(1);
  // 1 - 1.5 = -0.5 (once, not per pick): token 0 wins.
  EXPECT_EQ(s->Sample(logits).token, 0);
}

TEST(SamplerTest, SameSeedSameDrawsAndTopKBoundsThem) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 3;
  p.seed = 1234;
  auto a = Make(p);
  auto b = Make(p);
  std::vector<float> logits(100, 0.0f);
  logits[10] = 5.0f;
  logits[20] = 5.0f;
  logits[30] = 5.0f;
  std::set<TokenId> seen;
  for (int i = 0; i < 64; ++i) {
    const TokenId ta = a->Sample(logits).token;
    EXPECT_EQ(ta, b->Sample(logits).token);
    seen.insert(ta);
  }
  EXPECT_EQ(seen, (std::set<TokenId>{10, 20, 30}));
}

TEST(SamplerTest, TopPKeepsTheNucleus) {
  SamplingParams p;
  p.top_p = 0.5f;
  p.seed = 7;
  auto s = Make(p);
  // Token 3 has ~84% of the mass: the nucleus of 0.5 is token 3 alone.
  std::vector<float> logits = {0.0f, 0.0f, 0.0f, 3.0f};
  for (int i = 0; i < 32; ++i) EXPECT_EQ(s->Sample(logits).token, 3);
}

TEST(SamplerTest, ParametersOutOfRangeAreNamed) {
  auto expect_bad = [](SamplingParams p, const std::string& needle) {
    auto s = CreateSampler(p);
    ASSERT_FALSE(s.ok()) << needle;
    EXPECT_EQ(s.status().code(), Status::Code::kInvalidArgument);
    EXPECT_NE(s.status().message().find(needle), std::string::npos) << s.status().message();
  };
  SamplingParams p;
  p.temperature = -0.5f;
  expect_bad(p, "temperature");
  p = {};
  p.temperature = NAN;
  expect_bad(p, "temperature");
  p = {};
  p.top_p = 0.0f;
  expect_bad(p, "top_p");
  p = {};
  p.top_k = -1;
  expect_bad(p, "top_k");
  p = {};
  p.presence_penalty = 2.5f;
  expect_bad(p, "presence_penalty");
  p = {};
  p.frequency_penalty = -3.0f;
  expect_bad(p, "frequency_penalty");
}

}  // namespace
}  // namespace tailcut
