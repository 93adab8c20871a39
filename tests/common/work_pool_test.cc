#include "common/work_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <mutex>
#include <string>
#include <vector>

namespace tailcut {
namespace {

using Lane = WorkPool::Lane;

WorkPoolOptions Threads(int n, int64_t max_queued = 4096) {
  WorkPoolOptions o;
  o.threads = n;
  o.max_queued_tasks = max_queued;
  return o;
}

// Submits `fn` as new work, failing the test if the pool refuses it.
void Queue(WorkPool& pool, Lane lane, WorkPool::Task fn) {
  ASSERT_TRUE(pool.TrySubmit(lane, fn));
}

TEST(WorkPoolTest, RunsTasksOnItsOwnThreads) {
  WorkPool pool(Threads(2));
  EXPECT_EQ(pool.threads(), 2);
  EXPECT_FALSE(pool.OnPoolThread());
  std::promise<bool> on_pool;
  Queue(pool, Lane::kLight, [&] { on_pool.set_value(pool.OnPoolThread()); });
  EXPECT_TRUE(on_pool.get_future().get());
  pool.Stop();
}

TEST(WorkPoolTest, DefaultsToAtLeastTwoThreads) {
  WorkPool pool(WorkPoolOptions{});
  EXPECT_GE(pool.threads(), 2);
}

TEST(WorkPoolTest, HeavyTasksLeaveAThreadForLightOnes) {
  WorkPool pool(Threads(2));
  std::promise<void> release_first, first_started;
  std::shared_future<void> release = release_first.get_future().share();
  std::atomic<bool> second_started{false};
  Queue(pool, Lane::kHeavy, [&] {
    first_started.set_value();
    release.wait();
  });
  first_started.get_future().wait();
  std::promise<void> second_done;
  Queue(pool, Lane::kHeavy, [&] {
    second_started = true;
    second_done.set_value();
  });
  // The second thread is idle, but a heavy task may not take it: the light task does.
  std::promise<bool> light_saw_second;
  Queue(pool, Lane::kLight, [&] { light_saw_second.set_value(second_started.load()); });
  EXPECT_FALSE(light_saw_second.get_future().get());
  EXPECT_FALSE(second_started.load());
  release_first.set_value();
  second_done.get_future().wait();  // Runs once the first heavy task is done.
  pool.Stop();  // Before the promises and futures the tasks refer to go away.
}

TEST(WorkPoolTest, LightTasksAreTakenBeforeHeavyOnes) {
  WorkPool pool(Threads(2));
  std::promise<void> release_light_promise, release_heavy_promise, both_started_light,
      both_started_heavy;
  auto release_light = release_light_promise.get_future().share();
  auto release_heavy = release_heavy_promise.get_future().share();
  Queue(pool, Lane::kLight, [&] {
    both_started_light.set_value();
    release_light.wait();
  });
  Queue(pool, Lane::kHeavy, [&] {
    both_started_heavy.set_value();
    release_heavy.wait();
  });
  both_started_light.get_future().wait();
  both_started_heavy.get_future().wait();
  // Both threads busy: queue heavy first, then light. The thread freed next takes light.
  std::mutex m;
  std::vector<std::string> order;
  std::promise<void> all_done;
  Queue(pool, Lane::kHeavy, [&] {
    std::lock_guard<std::mutex> lock(m);
    order.push_back("heavy");
    if (order.size() == 2) all_done.set_value();
  });
  Queue(pool, Lane::kLight, [&] {
    std::lock_guard<std::mutex> lock(m);
    order.push_back("light");
    if (order.size() == 2) all_done.set_value();
  });
  release_heavy_promise.set_value();
  all_done.get_future().wait();
  EXPECT_EQ(order, (std::vector<std::string>{"light", "heavy"}));
  release_light_promise.set_value();
  pool.Stop();  // Before the promises and futures the tasks refer to go away.
}

TEST(WorkPoolTest, TrySubmitRefusesBeyondTheQueueBoundAndKeepsTheTask) {
  WorkPool pool(Threads(2, /*max_queued=*/2));
  std::promise<void> release_promise;
  auto release = release_promise.get_future().share();
  std::atomic<int> started{0}, ran{0};
  std::promise<void> both_started;
  for (int i = 0; i < 2; ++i) {
    Queue(pool, Lane::kLight, [&] {
      if (++started == 2) both_started.set_value();
      release.wait();
    });
  }
  both_started.get_future().wait();
  Queue(pool, Lane::kLight, [&] { ++ran; });
  Queue(pool, Lane::kHeavy, [&] { ++ran; });
  EXPECT_EQ(pool.queued(), 2);
  WorkPool::Task refused = [&] { ++ran; };
  EXPECT_FALSE(pool.TrySubmit(Lane::kLight, refused));
  ASSERT_TRUE(refused);  // Not consumed: the caller can still answer with it.
  // Continuations are never refused.
  pool.Submit(Lane::kLight, [&] { ++ran; });
  release_promise.set_value();
  pool.Stop();
  EXPECT_EQ(ran.load(), 3);
}

TEST(WorkPoolTest, StopRunsWhatIsQueuedAndLaterContinuationsInline) {
  WorkPool pool(Threads(2));
  std::atomic<int> ran{0};
  for (int i = 0; i < 100; ++i) {
    Queue(pool, i % 2 ? Lane::kHeavy : Lane::kLight, [&] { ++ran; });
  }
  pool.Stop();
  EXPECT_EQ(ran.load(), 100);
  WorkPool::Task late = [&] { ++ran; };
  EXPECT_FALSE(pool.TrySubmit(Lane::kLight, late));
  bool inline_run = false;
  pool.Submit(Lane::kLight, [&] { inline_run = true; });
  EXPECT_TRUE(inline_run);
  pool.Stop();  // Idempotent.
}

}  // namespace
}  // namespace tailcut
