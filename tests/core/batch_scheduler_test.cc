#include "core/batch_scheduler.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <set>

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

}  // namespace
}  // namespace tailcut
