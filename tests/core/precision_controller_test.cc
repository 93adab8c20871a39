#include "core/precision_controller.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tailcut {
namespace {

constexpr int64_t kSecond = 1'000'000;

LoadSignals Slo(double p99_ms, double utilization = 0.5, double slowdown = 2.0) {
  LoadSignals s;
  s.p99_micros = static_cast<int64_t>(p99_ms * 1000);
  s.samples = 1000;
  s.utilization = utilization;
  s.accurate_slowdown = slowdown;
  return s;
}

class PrecisionControllerTest : public ::testing::Test {
 protected:
  PrecisionPolicy policy_;
  ManualClock clock_{100 * kSecond};
};

TEST_F(PrecisionControllerTest, DegradesWhenP99ApproachesTheSlo) {
  PrecisionController c(policy_, clock_);
  EXPECT_FALSE(c.Update(Slo(40)));
  EXPECT_FALSE(c.on_fast());
  EXPECT_TRUE(c.Update(Slo(70)));  // 70 ms >= 80 % of 86 ms.
  EXPECT_TRUE(c.on_fast());
  EXPECT_EQ(c.current_variant(), "int8");
  EXPECT_EQ(c.switches(), 1);
  EXPECT_NE(c.last_reason().find("SLO"), std::string::npos) << c.last_reason();
}

TEST_F(PrecisionControllerTest, DegradesWhenTheWorkerSaturates) {
  PrecisionController c(policy_, clock_);
  EXPECT_TRUE(c.Update(Slo(20, /*utilization=*/0.95)));
  EXPECT_TRUE(c.on_fast());
}

TEST_F(PrecisionControllerTest, IgnoresP99OfTooFewRequests) {
  PrecisionController c(policy_, clock_);
  LoadSignals s = Slo(500);
  s.samples = 3;
  EXPECT_FALSE(c.Update(s));
}

TEST_F(PrecisionControllerTest, DwellTimeBlocksSwitchingBack) {
  PrecisionController c(policy_, clock_);
  ASSERT_TRUE(c.Update(Slo(80)));
  // Load vanishes at once, but the dwell time holds the fast variant.
  clock_.AdvanceMicros(policy_.min_dwell_micros - 1);
  EXPECT_FALSE(c.Update(Slo(2, 0.05)));
  EXPECT_TRUE(c.on_fast());
  clock_.AdvanceMicros(1);
  EXPECT_TRUE(c.Update(Slo(2, 0.05)));
  EXPECT_FALSE(c.on_fast());
}

TEST_F(PrecisionControllerTest, RestoresOnlyWhenTheAccurateVariantIsPredictedToFit) {
  PrecisionController c(policy_, clock_);
  ASSERT_TRUE(c.Update(Slo(80)));
  clock_.AdvanceMicros(policy_.min_dwell_micros);
  // On int8 the P99 looks fine (30 ms), but fp32 is 2x slower: 60 ms > 50 % of SLO. Stay.
  EXPECT_FALSE(c.Update(Slo(30, 0.2, 2.0)));
  // Utilisation 0.4 x 2 = 0.8 > 0.6: stay even with a low P99.
  EXPECT_FALSE(c.Update(Slo(10, 0.4, 2.0)));
  // Both fit: return.
  EXPECT_TRUE(c.Update(Slo(10, 0.25, 2.0)));
  EXPECT_FALSE(c.on_fast());
}

TEST_F(PrecisionControllerTest, StaysOnTheFastVariantWhileReferenceRowsAreOwed) {
  PrecisionController c(policy_, clock_);
  ASSERT_TRUE(c.Update(Slo(80)));
  clock_.AdvanceMicros(policy_.min_dwell_micros);
  // Every load signal says "come back", but the accurate variant's cache does not hold what
  // the fast one answered yet: switching now would turn each of those into a miss at once.
  LoadSignals idle = Slo(5, 0.05, 1.2);
  idle.reference_rows_owed = 3;
  EXPECT_FALSE(c.Update(idle));
  EXPECT_TRUE(c.on_fast());
  idle.reference_rows_owed = 0;
  EXPECT_TRUE(c.Update(idle));
  EXPECT_FALSE(c.on_fast());
  EXPECT_EQ(c.switches(), 2);
}

TEST_F(PrecisionControllerTest, DoesNotFlapUnderOscillatingLoad) {
  PrecisionController c(policy_, clock_);
  // Load swinging every second between overload and idle for two minutes: at most one
  // switch per dwell period, however the signal moves.
  for (int t = 0; t < 120; ++t) {
    const bool high = t % 2 == 0;
    c.Update(high ? Slo(90, 0.95) : Slo(5, 0.1));
    clock_.AdvanceMicros(kSecond);
  }
  EXPECT_LE(c.switches(), 120 * kSecond / policy_.min_dwell_micros + 1);
}

TEST_F(PrecisionControllerTest, HysteresisBandHoldsBetweenThresholds) {
  PrecisionController c(policy_, clock_);
  // Between restore (50 %) and degrade (80 %) nothing moves, in either state.
  for (int i = 0; i < 10; ++i) {
    EXPECT_FALSE(c.Update(Slo(55, 0.5, 1.0)));
    clock_.AdvanceMicros(policy_.min_dwell_micros);
  }
  ASSERT_TRUE(c.Update(Slo(75, 0.5, 1.0)));
  for (int i = 0; i < 10; ++i) {
    clock_.AdvanceMicros(policy_.min_dwell_micros);
    EXPECT_FALSE(c.Update(Slo(55, 0.5, 1.0)));
  }
  EXPECT_TRUE(c.on_fast());
}

TEST_F(PrecisionControllerTest, SourceArticleRuleIsExpressible) {
  // Switch to INT8 at >= 120 QPS and > 85 % memory use; back at <= 40 QPS and >= 3 GB free.
  policy_.mode = "thresholds";
  policy_.min_dwell_micros = 0;
  PrecisionController c(policy_, clock_);
  LoadSignals s;
  s.request_rate_per_s = 150;
  s.memory_used_fraction = 0.80;  // Busy, but memory is fine: stay.
  s.memory_free_bytes = 4LL << 30;
  EXPECT_FALSE(c.Update(s));
  s.memory_used_fraction = 0.90;
  s.memory_free_bytes = 1LL << 30;
  EXPECT_TRUE(c.Update(s));
  s.request_rate_per_s = 30;  // Quiet, but little memory free: stay conservative.
  EXPECT_FALSE(c.Update(s));
  s.memory_free_bytes = 3LL << 30;
  EXPECT_TRUE(c.Update(s));
  EXPECT_FALSE(c.on_fast());
}

TEST_F(PrecisionControllerTest, OffPinsTheAccurateVariant) {
  policy_.mode = "off";
  PrecisionController c(policy_, clock_);
  EXPECT_FALSE(c.Update(Slo(500, 1.0)));
  EXPECT_FALSE(c.on_fast());
}

LoadSignals Tokens(int64_t tokens, double prefill_share) {
  LoadSignals s;
  s.window_tokens = tokens;
  s.prefill_share = prefill_share;
  return s;
}

// The generative mode: to the fast-prefilling variant at a prompt share >= 75 % of enough
// tokens, back at <= 60 % or when idle, inside the band neither way; dwell as for the others.
TEST(PrecisionControllerPrefillTest, MovesByThePrefillShareWithItsBandAndDwell) {
  PrecisionPolicy policy;
  policy.mode = "prefill";
  policy.accurate_variant = "q4_1";
  policy.fast_variant = "q8_0";
  ManualClock clock(100 * kSecond);
  PrecisionController c(policy, clock);
  EXPECT_FALSE(c.Update(Tokens(100, 0.9)));  // Under min_window_tokens (256): no evidence.
  EXPECT_FALSE(c.Update(Tokens(1000, 0.74)));
  EXPECT_TRUE(c.Update(Tokens(1000, 0.75)));
  EXPECT_EQ(c.current_variant(), "q8_0");
  clock.AdvanceMicros(policy.min_dwell_micros);
  EXPECT_FALSE(c.Update(Tokens(1000, 0.61)));  // Inside the band.
  EXPECT_TRUE(c.Update(Tokens(1000, 0.60)));
  EXPECT_EQ(c.current_variant(), "q4_1");
  clock.AdvanceMicros(policy.min_dwell_micros);
  ASSERT_TRUE(c.Update(Tokens(500, 1.0)));
  EXPECT_FALSE(c.Update(Tokens(0, 0)));  // Idle, but within the dwell.
  clock.AdvanceMicros(policy.min_dwell_micros);
  EXPECT_TRUE(c.Update(Tokens(0, 0)));
  EXPECT_FALSE(c.on_fast());
  EXPECT_EQ(c.last_reason(), "idle: no tokens run in the window");
  EXPECT_EQ(c.switches(), 4);
}

}  // namespace
}  // namespace tailcut
