// GenerationPrecision: the variant choice of generative requests (pins by name and by GGUF
// type, unknown pins naming the variants), which variants the controller may move to (the
// perplexity bound, load failures), and the prefill-share controller with an injected clock:
// hysteresis, dwell, and back to the default when idle.
#include "core/generation_precision.h"

#include <gtest/gtest.h>

namespace tailcut {
namespace {

constexpr int64_t kSecond = 1'000'000;

VariantConfig Variant(std::string name, std::string precision, std::optional<double> ppl) {
  VariantConfig v;
  v.name = std::move(name);
  v.precision = std::move(precision);
  v.perplexity = ppl;
  v.batch_invariant = true;
  return v;
}

std::vector<VariantConfig> Variants() {
  return {Variant("q4_1", "q4_1", 18.346), Variant("q8_0", "q8_0", 18.354),
          Variant("q4_0", "q4_0", 23.036), Variant("raw", "f16", std::nullopt)};
}

class GenerationPrecisionTest : public ::testing::Test {
 protected:
  GenerationPrecisionTest() {
    config_.min_dwell_millis = 5000;
    config_.window_seconds = 10;
    config_.min_window_tokens = 100;
  }
  std::unique_ptr<GenerationPrecision> Make(std::vector<bool> loaded = {true, true, true, true}) {
    return std::make_unique<GenerationPrecision>(Variants(), std::move(loaded), 0, config_,
                                                 clock_);
  }
  // One second of load: `prompt` prompt and `generated` generated tokens, on variant `on`.
  bool Second(GenerationPrecision& p, int64_t prompt, int64_t generated) {
    totals_[static_cast<size_t>(p.active())].prompt_tokens += prompt;
    totals_[static_cast<size_t>(p.active())].generated_tokens += generated;
    clock_.AdvanceMicros(kSecond);
    return p.Tick(totals_);
  }

  GenerativePrecisionConfig config_;
  ManualClock clock_{100 * kSecond};
  std::vector<VariantTokens> totals_ = std::vector<VariantTokens>(4);
};

TEST_F(GenerationPrecisionTest, PinsByNameOrTypeAndNamesTheVariantsOfAnUnknownPin) {
  auto p = Make();
  EXPECT_EQ(*p->Choose(""), 0);
  EXPECT_EQ(*p->Choose("q8_0"), 1);
  EXPECT_EQ(*p->Choose("f16"), 3);  // The precision alias of "raw".
  EXPECT_EQ(*p->Choose("raw"), 3);
  auto bad = p->Choose("q2_k");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("'q2_k'"), std::string::npos);
  EXPECT_NE(bad.status().message().find("q4_1 (q4_1), q8_0 (q8_0)"), std::string::npos)
      << bad.status().message();
  // A variant that failed to load cannot be pinned, and is not offered.
  p = Make({true, false, true, true});
  bad = p->Choose("q8_0");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().find("q8_0 (q8_0)"), std::string::npos);
}

TEST_F(GenerationPrecisionTest, MovesOnlyToAVariantWithinThePerplexityBound) {
  auto p = Make();
  EXPECT_EQ(p->prefill_index(), 1);  // q8_0: +0.05 % against the 1 % bound.
  EXPECT_EQ(p->policy_name(), "prefill");
  EXPECT_TRUE(p->Eligible(1).ok());
  EXPECT_NE(p->Eligible(2).message().find("above the bound"), std::string::npos)
      << p->Eligible(2).message();  // q4_0: +26 %.
  EXPECT_NE(p->Eligible(3).message().find("no measured perplexity"), std::string::npos);

  // Naming an ineligible variant leaves the controller off, saying why.
  config_.prefill_variant = "q4_0";
  p = Make();
  EXPECT_EQ(p->prefill_index(), -1);
  EXPECT_EQ(p->policy_name(), "off");
  EXPECT_NE(p->note().find("above the bound"), std::string::npos) << p->note();
  // As does a failed load of the only candidate.
  config_.prefill_variant = "";
  p = Make({true, false, true, true});
  EXPECT_EQ(p->prefill_index(), -1);
  EXPECT_NE(p->note().find("failed to load"), std::string::npos) << p->note();
  config_.mode = "off";
  p = Make();
  EXPECT_EQ(p->prefill_index(), -1);
  EXPECT_EQ(p->note(), "off by configuration (precision.mode off)");
}

TEST_F(GenerationPrecisionTest, SwitchesByPrefillShareWithHysteresisAndDwell) {
  auto p = Make();
  ASSERT_EQ(p->prefill_index(), 1);
  // Decode-heavy load: stays on the default.
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(Second(*p, 20, 80));
  EXPECT_EQ(p->active(), 0);
  // Long prompts, short answers: once the window's prompt share reaches 75 %, unpinned
  // requests go to q8_0.
  bool switched = false;
  int seconds = 0;
  while (!switched && seconds < 20) {
    switched = Second(*p, 950, 50);
    ++seconds;
  }
  ASSERT_TRUE(switched);
  EXPECT_EQ(p->active(), 1);
  EXPECT_EQ(*p->Choose(""), 1);
  EXPECT_EQ(*p->Choose("q4_1"), 0);  // A pin still wins.
  EXPECT_EQ(p->switches(), 1);
  EXPECT_NE(p->last_reason().find("prompt tokens"), std::string::npos) << p->last_reason();
  // Inside the band (60 % .. 75 %): stays.
  for (int i = 0; i < 12; ++i) EXPECT_FALSE(Second(*p, 70, 30));
  EXPECT_EQ(p->active(), 1);
  // Decode-heavy again: back, but not within the dwell of the last switch.
  switched = false;
  seconds = 0;
  while (!switched && seconds < 30) {
    switched = Second(*p, 10, 90);
    ++seconds;
  }
  ASSERT_TRUE(switched);
  EXPECT_EQ(p->active(), 0);
  EXPECT_EQ(p->switches(), 2);
}

TEST_F(GenerationPrecisionTest, FewTokensAreNoEvidenceAndIdleGoesBackToTheDefault) {
  auto p = Make();
  // All prompt, but under min_window_tokens in the window: no move.
  for (int i = 0; i < 12; ++i) EXPECT_FALSE(Second(*p, 5, 0));
  EXPECT_EQ(p->active(), 0);
  for (int i = 0; i < 3; ++i) Second(*p, 500, 0);
  ASSERT_EQ(p->active(), 1);
  // Idle for a whole window (and past the dwell): back to the default.
  bool back = false;
  for (int i = 0; i < 12 && !back; ++i) back = Second(*p, 0, 0);
  EXPECT_TRUE(back);
  EXPECT_EQ(p->active(), 0);
  EXPECT_EQ(p->last_reason(), "idle: no tokens run in the window");
}

TEST_F(GenerationPrecisionTest, OneVariantHasNoController) {
  GenerationPrecision p({Variant("only", "", std::nullopt)}, {true}, 0, config_, clock_);
  EXPECT_EQ(p.policy_name(), "off");
  EXPECT_EQ(p.note(), "off: the model has one variant");
  EXPECT_EQ(*p.Choose(""), 0);
  EXPECT_FALSE(p.Tick({{1000, 0}}));
}

}  // namespace
}  // namespace tailcut
