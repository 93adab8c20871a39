#include "core/batch_scheduler.h"

#include <gtest/gtest.h>

#include <atomic>
#include <climits>
#include <condition_variable>
#include <future>
#include <map>
#include <set>
#include <stdexcept>

#include "tests/core/fake_task.h"

namespace tailcut {
namespace {

using testing::FakeTask;
using testing::IdOf;

std::vector<std::unique_ptr<BatchTask>> Tasks(int first_id, int count, int64_t now) {
  std::vector<std::unique_ptr<BatchTask>> v;
  for (int i = 0; i < count; ++i) v.push_back(std::make_unique<FakeTask>(first_id + i, 8, now));
  return v;
}

TEST(BatchSchedulerTest, RunsEveryTaskExactlyOnceOffTheCallerThread) {
  std::mutex mu;
  std::multiset<int> seen;
  std::set<std::thread::id> threads;
  BatchSchedulerOptions o;
  o.queue.max_batch_size = 8;
  BatchScheduler scheduler(o, [&](Batch&& b) {
    std::lock_guard<std::mutex> lock(mu);
    threads.insert(std::this_thread::get_id());
    EXPECT_LE(b.rows, 8);
    for (const auto& t : b.tasks) seen.insert(IdOf(t));
  });
  for (int i = 0; i < 50; ++i) {
    auto tasks = Tasks(i * 4, 4, SystemClock::Get().NowMicros());
    ASSERT_TRUE(scheduler.Schedule(tasks).ok());
  }
  scheduler.Stop(/*drain=*/true);
  EXPECT_EQ(seen.size(), 200u);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(seen.count(i), 1u) << i;
  EXPECT_EQ(threads.count(std::this_thread::get_id()), 0u);
}

TEST(BatchSchedulerTest, FullQueueRefusesWholeRequestAndKeepsItsTasks) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> started{0};
  BatchSchedulerOptions o;
  o.queue.max_batch_size = 1;
  o.queue.max_enqueued_rows = 3;
  BatchScheduler scheduler(o, [&](Batch&&) {
    ++started;
    released.wait();  // Hold the worker so the queue fills.
  });
  auto first = Tasks(0, 1, 0);
  ASSERT_TRUE(scheduler.Schedule(first).ok());
  while (started.load() == 0) std::this_thread::yield();
  auto fits = Tasks(1, 3, 0);
  ASSERT_TRUE(scheduler.Schedule(fits).ok());
  auto refused = Tasks(4, 2, 0);
  Status s = scheduler.Schedule(refused);
  EXPECT_EQ(s.code(), Status::Code::kResourceExhausted);
  EXPECT_EQ(refused.size(), 2u);
  EXPECT_EQ(scheduler.queued_rows(), 3);
  release.set_value();
  scheduler.Stop(/*drain=*/true);
}

// A process function the test drives: every batch blocks until the test ends it, so the
// test decides with its ManualClock how long each batch took.
class HeldBatches {
 public:
  BatchScheduler::ProcessFn Fn() {
    return [this](Batch&& b) {
      std::unique_lock<std::mutex> lock(mu_);
      const int index = started_++;
      rows_.push_back(b.rows);
      cv_.notify_all();
      cv_.wait(lock, [&] { return ended_ > index; });
    };
  }
  // Waits until `n` batches have begun.
  void WaitStarted(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return started_ >= n; });
  }
  // Lets the oldest running batch end (after the test advanced the clock by its duration).
  void EndOne() {
    std::lock_guard<std::mutex> lock(mu_);
    ++ended_;
    cv_.notify_all();
  }
  void EndAll() {
    std::lock_guard<std::mutex> lock(mu_);
    ended_ = INT_MAX;
    cv_.notify_all();
  }
  // Ends every batch on leaving scope. Declared after the scheduler, so that a failed ASSERT
  // does not leave the scheduler's destructor joining a worker held here.
  struct Releaser {
    HeldBatches* held;
    ~Releaser() { held->EndAll(); }
  };
  std::vector<int64_t> rows() {
    std::lock_guard<std::mutex> lock(mu_);
    return rows_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int started_ = 0;
  int ended_ = 0;
  std::vector<int64_t> rows_;
};

// Runs one batch of `count` 8-token tasks taking `micros` by the clock, and returns when the
// scheduler has measured it.
void RunMeasuredBatch(BatchScheduler& scheduler, HeldBatches& held, ManualClock& clock,
                      int* batches, int count, int64_t micros) {
  auto tasks = Tasks(100 * *batches, count, clock.NowMicros());
  ASSERT_TRUE(scheduler.Schedule(tasks).ok());
  held.WaitStarted(++*batches);
  clock.AdvanceMicros(micros);
  held.EndOne();
  while (scheduler.cost_model().samples() < *batches) std::this_thread::yield();
}

TEST(BatchSchedulerTest, LargeRequestIsAdmittedBehindQueuedWork) {
  // The row bound counts the rows ahead of a request and its first batch: a request with
  // more rows than the whole bound gets in while others are queued, and refuses the next.
  HeldBatches held;
  BatchSchedulerOptions o;
  o.num_workers = 1;
  o.queue.max_batch_size = 4;
  o.queue.max_enqueued_rows = 8;
  BatchScheduler scheduler(o, held.Fn());
  HeldBatches::Releaser releaser{&held};
  auto first = Tasks(0, 1, 0);
  ASSERT_TRUE(scheduler.Schedule(first).ok());
  held.WaitStarted(1);  // The worker is busy; what follows queues.
  auto small = Tasks(1, 2, 0);
  ASSERT_TRUE(scheduler.Schedule(small).ok());
  auto large = Tasks(10, 20, 0);  // 20 rows > the bound of 8; 2 ahead + 4 for its first batch.
  ASSERT_TRUE(scheduler.Schedule(large).ok());
  EXPECT_EQ(scheduler.queued_rows(), 22);
  auto next = Tasks(40, 1, 0);
  Status s = scheduler.Schedule(next);
  EXPECT_EQ(s.code(), Status::Code::kResourceExhausted);
  EXPECT_NE(s.message().find("queue full"), std::string::npos) << s.message();
  held.EndAll();
  scheduler.Stop(/*drain=*/true);
  int64_t ran = 0;
  for (int64_t r : held.rows()) {
    EXPECT_LE(r, 4);
    ran += r;
  }
  EXPECT_EQ(ran, 23);  // The first, the two and the twenty, in batches of at most four.
}

TEST(BatchSchedulerTest, WaitEstimateCountsTheRunningBatchAndEveryBatchsFixedCost) {
  ManualClock clock;
  HeldBatches held;
  BatchSchedulerOptions o;
  o.num_workers = 1;
  o.queue.max_batch_size = 4;
  o.queue.max_batch_tokens = 0;
  BatchScheduler scheduler(o, held.Fn(), clock);
  HeldBatches::Releaser releaser{&held};
  int batches = 0;
  EXPECT_EQ(scheduler.EstimatedWaitMicros(), 0);  // Nothing measured yet.
  // Batches cost 12 ms + 250 us per token: 8 tokens 14 ms, 32 tokens 20 ms.
  RunMeasuredBatch(scheduler, held, clock, &batches, 1, 14'000);
  RunMeasuredBatch(scheduler, held, clock, &batches, 1, 14'000);
  RunMeasuredBatch(scheduler, held, clock, &batches, 4, 20'000);
  const BatchCostModel cost = scheduler.cost_model();
  EXPECT_NEAR(cost.fixed_micros(), 12'000, 1);
  EXPECT_NEAR(cost.micros_per_token(), 250, 0.01);
  EXPECT_EQ(scheduler.EstimatedWaitMicros(), 0);  // Idle: a request would start at once.

  // A one-row batch starts (predicted 14 ms) and eight rows queue behind it: two batches.
  auto running = Tasks(500, 1, clock.NowMicros());
  ASSERT_TRUE(scheduler.Schedule(running).ok());
  held.WaitStarted(++batches);
  auto queued = Tasks(600, 8, clock.NowMicros());
  ASSERT_TRUE(scheduler.Schedule(queued).ok());
  EXPECT_NEAR(scheduler.EstimatedWaitMicros(), 14'000 + 2 * 12'000 + 64 * 250, 2);
  clock.AdvanceMicros(4'000);  // What has run of the running batch no longer counts.
  EXPECT_NEAR(scheduler.EstimatedWaitMicros(), 10'000 + 2 * 12'000 + 64 * 250, 2);
  clock.AdvanceMicros(20'000);  // Overrunning its prediction: counted as about to end.
  EXPECT_NEAR(scheduler.EstimatedWaitMicros(), 2 * 12'000 + 64 * 250, 2);
  held.EndAll();
  scheduler.Stop(/*drain=*/true);
}

TEST(BatchSchedulerTest, BatchesAreCutWhereTheirPredictedTimePassesTheBound) {
  ManualClock clock;
  HeldBatches held;
  BatchSchedulerOptions o;
  o.num_workers = 1;
  o.queue.max_batch_size = 64;
  o.queue.max_batch_tokens = 512;
  o.max_batch_micros = 20'000;
  BatchScheduler scheduler(o, held.Fn(), clock);
  HeldBatches::Releaser releaser{&held};
  int batches = 0;
  // Until batches of two sizes are measured the time bound is unknown: the token bound alone
  // applies. Batches cost 12 ms + 250 us per token: 20 ms allows 32 tokens, four rows of 8.
  RunMeasuredBatch(scheduler, held, clock, &batches, 1, 14'000);
  RunMeasuredBatch(scheduler, held, clock, &batches, 4, 20'000);
  EXPECT_EQ(held.rows(), (std::vector<int64_t>{1, 4}));

  auto running = Tasks(500, 1, clock.NowMicros());
  ASSERT_TRUE(scheduler.Schedule(running).ok());
  held.WaitStarted(++batches);
  auto queued = Tasks(600, 10, clock.NowMicros());  // 80 tokens: 10 rows fit the token bound.
  ASSERT_TRUE(scheduler.Schedule(queued).ok());
  // Three batches by time (4 + 4 + 2 rows), each paying the fixed part, after the running one.
  EXPECT_NEAR(scheduler.EstimatedWaitMicros(), 14'000 + 3 * 12'000 + 80 * 250, 2);
  for (int i = 0; i < 3; ++i) {
    clock.AdvanceMicros(20'000);
    held.EndOne();
    held.WaitStarted(++batches);
  }
  held.EndAll();
  scheduler.Stop(/*drain=*/true);
  const std::vector<int64_t> rows = held.rows();
  ASSERT_EQ(rows.size(), 6u);
  EXPECT_EQ(std::vector<int64_t>(rows.begin() + 3, rows.end()), (std::vector<int64_t>{4, 4, 2}));
}

// One worker, batches of 4 rows whatever their length, admission bounded at 100 ms: the
// admission tests' scheduler.
BatchSchedulerOptions AdmissionOptions() {
  BatchSchedulerOptions o;
  o.num_workers = 1;
  o.queue.max_batch_size = 4;
  o.queue.max_batch_tokens = 0;
  o.max_queue_delay_micros = 100'000;
  return o;
}

TEST(BatchSchedulerTest, AdmissionByTimeRefusesPastTheBoundButNotForTheRequestsOwnRows) {
  ManualClock clock;
  HeldBatches held;
  BatchSchedulerOptions o = AdmissionOptions();
  BatchScheduler scheduler(o, held.Fn(), clock);
  HeldBatches::Releaser releaser{&held};
  int batches = 0;
  RunMeasuredBatch(scheduler, held, clock, &batches, 1, 14'000);
  RunMeasuredBatch(scheduler, held, clock, &batches, 1, 14'000);
  RunMeasuredBatch(scheduler, held, clock, &batches, 4, 20'000);

  // Idle: a request of 400 rows (100 batches, ~2 s of work) is admitted; it is its own work.
  auto large = Tasks(1000, 400, clock.NowMicros());
  ASSERT_TRUE(scheduler.Schedule(large).ok());
  held.WaitStarted(++batches);
  // Behind it, even one row would wait ~2 s: refused, and told why.
  EXPECT_GT(scheduler.EstimatedWaitMicros(), 1'000'000);
  auto one = Tasks(2000, 1, clock.NowMicros());
  Status s = scheduler.Schedule(one);
  EXPECT_EQ(s.code(), Status::Code::kResourceExhausted);
  EXPECT_NE(s.message().find("overloaded"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("100 ms limit"), std::string::npos) << s.message();
  EXPECT_EQ(one.size(), 1u);  // Handed back whole.

  // Drain the large request down to a wait within the bound: then a row is admitted again.
  while (scheduler.EstimatedWaitMicros() > o.max_queue_delay_micros) {
    clock.AdvanceMicros(20'000);
    held.EndOne();
    held.WaitStarted(++batches);
  }
  EXPECT_TRUE(scheduler.Schedule(one).ok());
  held.EndAll();
  scheduler.Stop(/*drain=*/true);
}

TEST(BatchSchedulerTest, TasksThatWaitedLongerThanEstimatedRaiseTheEstimate) {
  ManualClock clock;
  HeldBatches held;
  BatchSchedulerOptions o = AdmissionOptions();
  o.cost.margin_step_micros = 1000;
  BatchScheduler scheduler(o, held.Fn(), clock);
  HeldBatches::Releaser releaser{&held};
  int batches = 0;
  RunMeasuredBatch(scheduler, held, clock, &batches, 1, 14'000);
  RunMeasuredBatch(scheduler, held, clock, &batches, 1, 14'000);
  RunMeasuredBatch(scheduler, held, clock, &batches, 4, 20'000);
  const int64_t before = scheduler.cost_model().wait_margin_micros();
  EXPECT_LT(before, 1000);  // Those waited about as estimated.

  // A batch predicted at 14 ms takes 60 (the machine got slower): the four rows queued
  // behind it wait far longer than estimated, and each raises the margin by 0.99 step (the
  // one that started at once, as estimated, lowered it by 0.01 step).
  auto running = Tasks(500, 1, clock.NowMicros());
  ASSERT_TRUE(scheduler.Schedule(running).ok());
  held.WaitStarted(++batches);
  auto queued = Tasks(600, 4, clock.NowMicros());
  ASSERT_TRUE(scheduler.Schedule(queued).ok());
  clock.AdvanceMicros(60'000);
  held.EndOne();
  held.WaitStarted(++batches);
  EXPECT_EQ(scheduler.cost_model().wait_margin_micros(), before - 10 + 4 * 990);
  clock.AdvanceMicros(20'000);
  held.EndOne();
  while (scheduler.cost_model().samples() < batches) std::this_thread::yield();
  // Idle again, and still a request would be estimated to wait the margin.
  EXPECT_EQ(scheduler.EstimatedWaitMicros(), before - 10 + 4 * 990);
}

TEST(BatchSchedulerTest, BatchesWhoseRowsWereAllDroppedTeachTheCostModelNothing) {
  // Rows whose request ended while queued (a client went away) are dropped before a batch
  // forms: they never run, are failed with Cancelled, and the fit never sees a batch of
  // them as a free batch.
  BatchSchedulerOptions o;
  o.num_workers = 1;
  o.queue.max_batch_size = 4;
  o.queue.batch_timeout_micros = 0;
  Counter dropped;
  o.dropped_rows = &dropped;
  std::atomic<int> ran_abandoned{0};
  BatchScheduler scheduler(o, [&](Batch&& b) {
    for (const auto& t : b.tasks) {
      if (IdOf(t) >= 100) ++ran_abandoned;
    }
  });
  FakeTask::Failures failures;
  for (int first : {0, 100, 104, 4}) {
    auto tasks = Tasks(first, 4, SystemClock::Get().NowMicros());
    for (auto& t : tasks) {
      auto& fake = static_cast<FakeTask&>(*t);
      fake.abandoned_flag = first >= 100;
      fake.set_failures(&failures);
    }
    ASSERT_TRUE(scheduler.Schedule(tasks).ok());
  }
  scheduler.Stop(/*drain=*/true);  // Joins the worker: its bookkeeping is done.
  EXPECT_EQ(scheduler.cost_model().samples(), 2);
  EXPECT_EQ(ran_abandoned.load(), 0);
  EXPECT_EQ(failures.count.load(), 8);
  EXPECT_EQ(failures.last.load(), Status::Code::kCancelled);
  EXPECT_EQ(dropped.value(), 8);
}

TEST(BatchSchedulerTest, StopWithoutDrainFailsQueuedTasks) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> started{0};
  BatchSchedulerOptions o;
  o.queue.max_batch_size = 1;
  BatchScheduler scheduler(o, [&](Batch&&) {
    ++started;
    released.wait();
  });
  auto first = Tasks(0, 1, 0);
  ASSERT_TRUE(scheduler.Schedule(first).ok());
  while (started.load() == 0) std::this_thread::yield();

  FakeTask::Failures failures;
  auto queued = Tasks(1, 2, 0);
  for (auto& t : queued) static_cast<FakeTask&>(*t).set_failures(&failures);
  ASSERT_TRUE(scheduler.Schedule(queued).ok());
  std::thread stopper([&] { scheduler.Stop(/*drain=*/false); });
  // Stop() fails the queued tasks before it joins the busy worker.
  while (failures.count.load() < 2) std::this_thread::yield();
  EXPECT_EQ(failures.last.load(), Status::Code::kUnavailable);
  release.set_value();
  stopper.join();
  EXPECT_EQ(started.load(), 1);
  auto late = Tasks(3, 1, 0);
  EXPECT_EQ(scheduler.Schedule(late).code(), Status::Code::kUnavailable);
}

TEST(BatchSchedulerTest, ExpiredTasksAreFailedNotRun) {
  std::atomic<int> ran{0};
  BatchSchedulerOptions o;
  BatchScheduler scheduler(o, [&](Batch&& b) { ran += static_cast<int>(b.tasks.size()); });
  FakeTask::Failures failures;
  std::vector<std::unique_ptr<BatchTask>> tasks;
  // A deadline already in the past.
  auto task = std::make_unique<FakeTask>(1, 8, 0, 1, /*deadline=*/1);
  task->set_failures(&failures);
  tasks.push_back(std::move(task));
  ASSERT_TRUE(scheduler.Schedule(tasks).ok());
  scheduler.Stop(/*drain=*/true);
  EXPECT_EQ(failures.count.load(), 1);
  EXPECT_EQ(failures.last.load(), Status::Code::kDeadlineExceeded);
  EXPECT_EQ(ran.load(), 0);
}

// A FakeTask that reports how it was failed into a map shared by the test (the task itself is
// gone by the time the test looks).
class RecordingTask : public FakeTask {
 public:
  RecordingTask(int id, std::mutex* mu, std::map<int, Status>* failed)
      : FakeTask(id, 8, 0), mu_(mu), failed_(failed) {}
  void Fail(const Status& status) override {
    FakeTask::Fail(status);
    std::lock_guard<std::mutex> lock(*mu_);
    failed_->emplace(id(), status);
  }

 private:
  std::mutex* mu_;
  std::map<int, Status>* failed_;
};

TEST(BatchSchedulerTest, ThrowingBatchFailsItsTasksAndTheWorkerGoesOn) {
  std::mutex mu;
  std::map<int, Status> failed;
  std::vector<int> ran;
  std::unique_ptr<BatchTask> handed_on;  // Moved out of its batch before the throw.
  BatchSchedulerOptions o;
  o.num_workers = 1;
  o.queue.max_batch_size = 1;  // One task per batch: each id picks how its batch ends.
  BatchScheduler scheduler(o, [&](Batch&& b) {
    const int id = IdOf(b.tasks.front());
    if (id == 0) throw std::runtime_error("boom in the engine");
    if (id == 1) throw 42;
    if (id == 2) {
      handed_on = std::move(b.tasks.front());
      throw std::runtime_error("after handing the task on");
    }
    std::lock_guard<std::mutex> lock(mu);
    ran.push_back(id);
  });
  std::vector<std::unique_ptr<BatchTask>> tasks;
  for (int id = 0; id < 4; ++id) tasks.push_back(std::make_unique<RecordingTask>(id, &mu, &failed));
  ASSERT_TRUE(scheduler.Schedule(tasks).ok());
  scheduler.Stop(/*drain=*/true);

  ASSERT_EQ(failed.size(), 2u);
  EXPECT_EQ(failed.at(0).code(), Status::Code::kInternal);
  EXPECT_NE(failed.at(0).message().find("boom in the engine"), std::string::npos)
      << failed.at(0).message();
  EXPECT_EQ(failed.at(1).code(), Status::Code::kInternal);
  EXPECT_NE(failed.at(1).message().find("not a std::exception"), std::string::npos)
      << failed.at(1).message();
  // The task the process function took out of the batch is its own to answer.
  ASSERT_NE(handed_on, nullptr);
  EXPECT_EQ(static_cast<FakeTask&>(*handed_on).fail_count, 0);
  // The same worker served the batch after the throws.
  EXPECT_EQ(ran, (std::vector<int>{3}));
}

}  // namespace
}  // namespace tailcut
