#include "core/batch_cost_model.h"

#include <gtest/gtest.h>

namespace tailcut {
namespace {

// Batches that cost 2 ms each plus 50 us per padded token.
int64_t LineMicros(int64_t padded_tokens) { return 2000 + 50 * padded_tokens; }

TEST(BatchCostModelTest, NothingMeasuredPredictsNothing) {
  BatchCostModel m;
  EXPECT_FALSE(m.measured());
  EXPECT_EQ(m.BatchMicros(512), 0);
  EXPECT_EQ(m.DrainMicros(100, 1000, 64, 512), 0);
}

TEST(BatchCostModelTest, FitsTheFixedPartAndThePerTokenPart) {
  BatchCostModel m;
  for (int i = 0; i < 40; ++i) {
    const int64_t x = i % 2 ? 64 : 512;
    m.Observe(x, x, LineMicros(x));
  }
  EXPECT_NEAR(m.fixed_micros(), 2000, 1);
  EXPECT_NEAR(m.micros_per_token(), 50, 0.01);
  EXPECT_NEAR(m.BatchMicros(256), LineMicros(256), 2);
}

TEST(BatchCostModelTest, DrainPaysTheFixedPartOncePerBatch) {
  BatchCostModel m;
  for (int i = 0; i < 40; ++i) {
    const int64_t x = i % 2 ? 64 : 512;
    m.Observe(x, x, LineMicros(x));
  }
  // 640 rows of 8 tokens: ten batches by rows (64 each), ten by tokens (512 each).
  EXPECT_NEAR(m.DrainMicros(640, 5120, 64, 512), 10 * 2000 + 50 * 5120, 10);
  // 10 rows of 200 tokens: four batches by tokens, however few the rows.
  EXPECT_NEAR(m.DrainMicros(10, 2000, 64, 512), 4 * 2000 + 50 * 2000, 10);
  // One row longer than a batch's token budget still runs as one batch.
  EXPECT_NEAR(m.DrainMicros(1, 1000, 64, 512), 2000 + 50 * 1000, 10);
  EXPECT_EQ(m.DrainMicros(0, 0, 64, 512), 0);
}

TEST(BatchCostModelTest, TokensWithinATimeAreWhatTheLineAllows) {
  BatchCostModel m;
  EXPECT_EQ(m.TokensWithin(10'000), 0);  // Nothing measured: no bound known.
  m.Observe(64, 64, LineMicros(64));
  EXPECT_EQ(m.TokensWithin(10'000), 0);  // One size: the fixed part is not known yet.
  for (int i = 0; i < 40; ++i) {
    const int64_t x = i % 2 ? 64 : 512;
    m.Observe(x, x, LineMicros(x));
  }
  EXPECT_NEAR(m.TokensWithin(10'000), 160, 1);  // (10 ms - 2 ms) / 50 us.
  EXPECT_LE(m.BatchMicros(m.TokensWithin(10'000)), 10'000 + 1);
  // A bound below the fixed part still lets a batch of one short row run.
  EXPECT_EQ(m.TokensWithin(1'000), 1);
}

TEST(BatchCostModelTest, BatchesOfOneSizePredictTheirOwnTime) {
  BatchCostModel m;
  for (int i = 0; i < 40; ++i) {
    const int64_t x = i % 2 ? 64 : 512;
    m.Observe(x, x, LineMicros(x));
  }
  // Overload: every batch is full, and slower than the line said (a busy machine). The
  // slope is not identifiable from these; the line moves to pass through them.
  for (int i = 0; i < 40; ++i) m.Observe(512, 512, 40'000);
  EXPECT_NEAR(m.BatchMicros(512), 40'000, 200);
  EXPECT_GE(m.fixed_micros(), 0);
  EXPECT_GT(m.micros_per_token(), 0);
}

TEST(BatchCostModelTest, FollowsAMachineThatGetsSlowerWithinAFewBatches) {
  BatchCostModelOptions o;
  o.memory_batches = 8;
  BatchCostModel m(o);
  for (int i = 0; i < 50; ++i) m.Observe(512, 512, 30'000);
  EXPECT_NEAR(m.BatchMicros(512), 30'000, 100);
  // A neighbour starts: batches take twice as long. Sixteen batches later (half a second
  // of them) the prediction is within 10 % of the new time; one slow batch moves it an eighth.
  m.Observe(512, 512, 60'000);
  EXPECT_NEAR(m.BatchMicros(512), 30'000 + 30'000 / 8, 100);
  for (int i = 1; i < 16; ++i) m.Observe(512, 512, 60'000);
  EXPECT_GT(m.BatchMicros(512), 54'000);
}

TEST(BatchCostModelTest, SmallSlowBatchesDoNotMakeTokensLookExpensive) {
  BatchCostModel m;
  for (int i = 0; i < 40; ++i) {
    const int64_t x = i % 2 ? 8 : 512;
    m.Observe(x, x, LineMicros(x));
  }
  // Light load: one-row batches of 8 tokens, each mostly fixed cost. A cost per token alone
  // would put 2400 / 8 = 300 us on every token of a queue.
  for (int i = 0; i < 40; ++i) m.Observe(8, 8, LineMicros(8));
  EXPECT_NEAR(m.DrainMicros(64, 512, 64, 512), LineMicros(512), 50);
}

TEST(BatchCostModelTest, QueuedTokensArePaddedAsRecentBatchesWere) {
  BatchCostModel m;
  for (int i = 0; i < 40; ++i) {
    const int64_t x = i % 2 ? 64 : 512;
    m.Observe(x, x / 2, LineMicros(x));  // Half of every batch was padding.
  }
  EXPECT_NEAR(m.padding(), 2.0, 1e-9);
  EXPECT_NEAR(m.DrainMicros(32, 256, 64, 512), LineMicros(512), 10);
}

TEST(BatchCostModelTest, WaitMarginTracksTheHighPercentileOfUnderestimates) {
  BatchCostModelOptions o;
  o.margin_step_micros = 1000;
  BatchCostModel m(o);
  EXPECT_EQ(m.wait_margin_micros(), 0);
  // Every task waits 50 ms longer than estimated (grouping passed it over, say): the margin
  // climbs to that within about 50 tasks and stays within a step of it.
  for (int i = 0; i < 60; ++i) m.ObserveWait(100'000, 150'000);
  EXPECT_NEAR(m.wait_margin_micros(), 50'000, 1000);
  // One task in 50 waits 50 ms longer, the rest as estimated: 2 % is above the 99th
  // percentile, so the margin stays near 50 ms rather than falling to 0.
  for (int i = 0; i < 5000; ++i) m.ObserveWait(100'000, i % 50 == 0 ? 150'000 : 100'000);
  EXPECT_NEAR(m.wait_margin_micros(), 50'000, 1500);
  // Estimates that were pessimistic bring it below zero (admission uses it from 0 up).
  for (int i = 0; i < 20'000; ++i) m.ObserveWait(100'000, 90'000);
  EXPECT_LT(m.wait_margin_micros(), 0);
}

}  // namespace
}  // namespace tailcut
