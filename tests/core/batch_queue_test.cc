#include "core/batch_queue.h"

#include <gtest/gtest.h>

#include "tests/core/fake_task.h"

namespace tailcut {
namespace {

using testing::FakeTask;
using testing::IdOf;

class BatchQueueTest : public ::testing::Test {
 protected:
  void Add(BatchQueue& q, int id, int64_t length, int64_t rows = 1, int64_t deadline = 0,
           uint64_t key = 0) {
    std::unique_ptr<BatchTask> t =
        std::make_unique<FakeTask>(id, length, clock_.NowMicros(), rows, deadline, key);
    ASSERT_TRUE(q.Enqueue(t).ok());
  }
  static std::vector<int> Ids(const Batch& b) {
    std::vector<int> ids;
    for (const auto& t : b.tasks) ids.push_back(IdOf(t));
    return ids;
  }
  ManualClock clock_;
};

TEST_F(BatchQueueTest, WaitsForTimeoutUnlessFull) {
  BatchQueueOptions o;
  o.max_batch_size = 4;
  o.batch_timeout_micros = 1000;
  BatchQueue q(o, clock_);
  EXPECT_FALSE(q.ReadyToForm());
  EXPECT_FALSE(q.NextReadyTimeMicros().has_value());

  Add(q, 1, 10);
  EXPECT_FALSE(q.ReadyToForm());
  EXPECT_EQ(*q.NextReadyTimeMicros(), clock_.NowMicros() + 1000);
  clock_.AdvanceMicros(999);
  EXPECT_FALSE(q.ReadyToForm());
  clock_.AdvanceMicros(1);
  EXPECT_TRUE(q.ReadyToForm());
}

TEST_F(BatchQueueTest, FullBatchIsReadyAtOnce) {
  BatchQueueOptions o;
  o.max_batch_size = 3;
  o.batch_timeout_micros = 1'000'000;
  BatchQueue q(o, clock_);
  Add(q, 1, 10);
  Add(q, 2, 10);
  EXPECT_FALSE(q.ReadyToForm());
  Add(q, 3, 10);
  EXPECT_TRUE(q.ReadyToForm());
  Batch b = q.FormBatch();
  EXPECT_EQ(Ids(b), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(q.queued_rows(), 0);
}

TEST_F(BatchQueueTest, TokenBudgetMakesReadyAndBoundsBatch) {
  BatchQueueOptions o;
  o.max_batch_size = 100;
  o.max_batch_tokens = 100;
  o.batch_timeout_micros = 1'000'000;
  BatchQueue q(o, clock_);
  Add(q, 1, 40);
  Add(q, 2, 40);
  EXPECT_FALSE(q.ReadyToForm());
  Add(q, 3, 40);
  EXPECT_TRUE(q.ReadyToForm());
  Batch b = q.FormBatch();
  // Three rows of 40 would be 120 padded tokens: only two fit.
  EXPECT_EQ(Ids(b), (std::vector<int>{1, 2}));
  EXPECT_EQ(b.padded_tokens(), 80);
  EXPECT_EQ(q.queued_tasks(), 1u);
}

TEST_F(BatchQueueTest, ATokenLimitGivenAtFormationBoundsThatBatch) {
  BatchQueueOptions o;
  o.max_batch_size = 100;
  o.max_batch_tokens = 512;
  BatchQueue q(o, clock_);
  for (int id = 1; id <= 6; ++id) Add(q, id, 16);
  // The scheduler's time bound allows 64 padded tokens: four rows of 16.
  EXPECT_EQ(Ids(q.FormBatch(64)), (std::vector<int>{1, 2, 3, 4}));
  // The oldest task runs even when it alone is over the limit.
  EXPECT_EQ(Ids(q.FormBatch(8)), (std::vector<int>{5}));
  EXPECT_EQ(Ids(q.FormBatch(0)), (std::vector<int>{6}));  // 0: no limit.
}

TEST_F(BatchQueueTest, ABatchIsFullAtTheTokenLimitGiven) {
  BatchQueueOptions o;
  o.max_batch_size = 100;
  o.max_batch_tokens = 512;
  o.batch_timeout_micros = 1'000'000;
  BatchQueue q(o, clock_);
  for (int id = 1; id <= 4; ++id) Add(q, id, 16);
  // 64 queued tokens fill a batch that the time bound cuts at 64, not one of 512: no waiting
  // for the batch timeout when the batch that would form is already as large as allowed.
  EXPECT_FALSE(q.ReadyToForm());
  EXPECT_TRUE(q.ReadyToForm(64));
  EXPECT_EQ(*q.NextReadyTimeMicros(64), clock_.NowMicros());
  EXPECT_EQ(*q.NextReadyTimeMicros(), clock_.NowMicros() + 1'000'000);
}

TEST_F(BatchQueueTest, GroupsSimilarLengthsAroundTheOldest) {
  BatchQueueOptions o;
  o.max_batch_size = 3;
  o.max_batch_tokens = 0;
  BatchQueue q(o, clock_);
  Add(q, 1, 12);   // Oldest: always in the next batch.
  Add(q, 2, 200);  // Long: would make the short ones pay 200 tokens each.
  Add(q, 3, 10);
  Add(q, 4, 300);
  Add(q, 5, 14);
  Batch b = q.FormBatch();
  EXPECT_EQ(Ids(b), (std::vector<int>{1, 3, 5}));
  EXPECT_EQ(b.max_length, 14);
  Batch rest = q.FormBatch();
  EXPECT_EQ(Ids(rest), (std::vector<int>{2, 4}));
}

TEST_F(BatchQueueTest, OnlyCompatibleKeysShareABatch) {
  BatchQueueOptions o;
  o.max_batch_size = 8;
  BatchQueue q(o, clock_);
  Add(q, 1, 1, 1, 0, /*key=*/7);
  Add(q, 2, 1, 1, 0, /*key=*/9);
  Add(q, 3, 1, 1, 0, /*key=*/7);
  EXPECT_EQ(Ids(q.FormBatch()), (std::vector<int>{1, 3}));
  EXPECT_EQ(Ids(q.FormBatch()), (std::vector<int>{2}));
}

TEST_F(BatchQueueTest, MultiRowTasksCountRows) {
  BatchQueueOptions o;
  o.max_batch_size = 4;
  BatchQueue q(o, clock_);
  Add(q, 1, 1, /*rows=*/3);
  Add(q, 2, 1, /*rows=*/2);
  Add(q, 3, 1, /*rows=*/1);
  Batch b = q.FormBatch();
  EXPECT_EQ(Ids(b), (std::vector<int>{1, 3}));
  EXPECT_EQ(b.rows, 4);
}

TEST_F(BatchQueueTest, RefusesBeyondQueueBoundButAdmitsOneIntoEmptyQueue) {
  BatchQueueOptions o;
  o.max_enqueued_rows = 2;
  BatchQueue q(o, clock_);
  std::unique_ptr<BatchTask> big = std::make_unique<FakeTask>(1, 1, 0, /*rows=*/5);
  EXPECT_TRUE(q.Enqueue(big).ok());
  std::unique_ptr<BatchTask> next = std::make_unique<FakeTask>(2, 1, 0);
  Status s = q.Enqueue(next);
  EXPECT_EQ(s.code(), Status::Code::kResourceExhausted);
  ASSERT_NE(next, nullptr);  // Handed back to the caller.
}

TEST_F(BatchQueueTest, LargeTaskIsAdmittedWhileFewRowsAreAhead) {
  // The bound counts the rows ahead and the task's first batch (max_batch_size), not all of
  // a task larger than the bound: such a task would otherwise need an empty queue.
  BatchQueueOptions o;
  o.max_batch_size = 2;
  o.max_enqueued_rows = 4;
  BatchQueue q(o, clock_);
  Add(q, 1, 1);
  std::unique_ptr<BatchTask> large = std::make_unique<FakeTask>(2, 1, 0, /*rows=*/10);
  EXPECT_TRUE(q.Enqueue(large).ok());  // 1 ahead + 2 of its own <= 4.
  EXPECT_EQ(q.queued_rows(), 11);
  std::unique_ptr<BatchTask> next = std::make_unique<FakeTask>(3, 1, 0);
  EXPECT_EQ(q.Enqueue(next).code(), Status::Code::kResourceExhausted);
}

TEST_F(BatchQueueTest, RemovesTasksThatCannotMeetTheirDeadline) {
  BatchQueueOptions o;
  BatchQueue q(o, clock_);
  const int64_t now = clock_.NowMicros();
  Add(q, 1, 10, 1, /*deadline=*/now + 500);
  Add(q, 2, 10, 1, /*deadline=*/now + 5000);
  Add(q, 3, 10, 1, /*deadline=*/0);
  std::vector<std::unique_ptr<BatchTask>> expired;
  q.RemoveExpired(/*expected_batch_micros=*/1000, &expired);
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(IdOf(expired[0]), 1);
  EXPECT_EQ(q.queued_rows(), 2);
  EXPECT_EQ(Ids(q.FormBatch()), (std::vector<int>{2, 3}));
}

TEST_F(BatchQueueTest, OldestTaskIsNeverStarved) {
  BatchQueueOptions o;
  o.max_batch_size = 2;
  o.max_batch_tokens = 0;
  BatchQueue q(o, clock_);
  Add(q, 1, 250);  // An outlier length.
  for (int i = 2; i < 10; ++i) Add(q, i, 10);
  // The long task goes first even though the short ones group better.
  Batch b = q.FormBatch();
  EXPECT_EQ(IdOf(b.tasks.front()), 1);
}

}  // namespace
}  // namespace tailcut
