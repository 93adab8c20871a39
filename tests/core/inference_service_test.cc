// InferenceService::ReloadModel (src/core/inference_service.h) over a real model repository:
// one folder whose model.yaml points at the default model's files, so a reload can change
// what the model answers (max_sequence_length, which shows in every answer's token count)
// without copying 90 MB. Checked: every request in flight during a reload is answered
// exactly once, by the old copy or the new one; the old copy serves what it admitted after
// the swap (so it lives until then: under ASan a premature destruction is a
// heap-use-after-free); a reload that fails leaves the old copy serving.
#include "core/inference_service.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/engine/test_paths.h"

namespace tailcut {
namespace {

namespace fs = std::filesystem;

// Longer than the longest the tests wait for anything in real time, loads included.
constexpr std::chrono::seconds kWait{120};

// Far more tokens than either max_sequence_length below, so the token count tells which copy
// of the model answered.
std::string Text(int n) {
  return "request " + std::to_string(n) +
         " asks about the quick brown fox that jumps over the lazy dog again and again, while"
         " the old cat watches from the window of the small house by the river";
}
constexpr int kOldMaxLength = 24;
constexpr int kNewMaxLength = 12;

// Every answer, by request number: how often it came and the token count of the last.
class Answers {
 public:
  EmbedCallback For(int n) {
    return [this, n](Result<EmbedResult> r) {
      std::lock_guard<std::mutex> lock(mutex_);
      Entry& e = entries_[n];
      ++e.calls;
      e.ok = r.ok();
      e.error = r.ok() ? "" : r.status().ToString();
      e.tokens = r.ok() && !r->token_counts.empty() ? r->token_counts[0] : 0;
      ++total_;
      cv_.notify_all();
    };
  }
  // Waits until `n` answers came in all; false if they did not.
  bool WaitForTotal(int n) {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, kWait, [&] { return total_ >= n; });
  }
  struct Entry {
    int calls = 0;
    bool ok = false;
    std::string error;
    int tokens = 0;
  };
  std::map<int, Entry> entries() {
    std::lock_guard<std::mutex> lock(mutex_);
    return entries_;
  }
  int total() {
    std::lock_guard<std::mutex> lock(mutex_);
    return total_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<int, Entry> entries_;
  int total_ = 0;
};

class InferenceServiceReloadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string model_dir = testing::ModelDir();
    if (!fs::exists(model_dir + "/model.onnx")) GTEST_SKIP() << "no model at " << model_dir;
    repo_ = testing::TempDir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    folder_ = repo_ / "minilm";
    fs::create_directories(folder_);
    WriteConfig(kOldMaxLength, model_dir + "/model.onnx");
  }
  void TearDown() override {
    service_.reset();
    std::error_code ec;
    fs::remove_all(repo_, ec);
  }

  // The model's folder: the default model's files under another max_sequence_length, or
  // another file, or another name.
  void WriteConfig(int max_length, const std::string& file, const std::string& name = "minilm") {
    const std::string model_dir = testing::ModelDir();
    std::ofstream(folder_ / "model.yaml") << "name: " << name << "\n"
                                          << "kind: text-embedding\n"
                                          << "file: " << file << "\n"
                                          << "tokenizer: " << model_dir << "/tokenizer.json\n"
                                          << "max_sequence_length: " << max_length << "\n"
                                          << "output: sentence_embedding\n"
                                          << "pooling: none\n"
                                          << "normalize: true\n"
                                          << "dimensions: 384\n";
  }

  // `batch_timeout_micros` on `clock` holds requests in the queue until the test moves it.
  void Start(const Clock& clock, int64_t batch_timeout_micros) {
    InferenceServiceOptions o;
    o.model_repository = repo_.string();
    o.cache_enabled = false;  // Every request reaches the model's queue.
    o.text.scheduler.num_workers = 1;
    o.text.scheduler.queue.batch_timeout_micros = batch_timeout_micros;
    o.text.default_timeout_micros = 0;  // The clock may jump; no request should expire.
    o.text.max_queue_delay_micros = 0;
    o.text.warmup = false;
    o.text.precision.mode = "off";
    auto s = InferenceService::Create(o, metrics_, clock);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    service_ = std::move(s).value();
    ASSERT_TRUE(service_->LoadStartupModels().ok());
  }

  void Embed(int n) {
    EmbedRequest r;
    r.model = "minilm";
    r.inputs = {Text(n)};
    service_->Embed(std::move(r), answers_.For(n));
  }

  // Reloads and waits for the outcome; nullopt if it never came.
  std::optional<Status> Reload() {
    std::mutex mutex;
    std::condition_variable cv;
    std::optional<Status> result;
    service_->ReloadModel("minilm", [&](const Status& s) {
      std::lock_guard<std::mutex> lock(mutex);
      result = s;
      cv.notify_all();
    });
    std::unique_lock<std::mutex> lock(mutex);
    cv.wait_for(lock, kWait, [&] { return result.has_value(); });
    return result;
  }
  static std::string Describe(const std::optional<Status>& s) {
    return s ? s->ToString() : "the reload never answered";
  }

  fs::path repo_, folder_;
  MetricsRegistry metrics_;
  Answers answers_;
  std::unique_ptr<InferenceService> service_;
};

TEST_F(InferenceServiceReloadTest, RequestsQueuedInTheOldCopyAreAnsweredByItAfterTheSwap) {
  // The queue forms a batch only when the oldest request has waited a second on this
  // clock, so the first requests are still queued in the old copy when it is replaced.
  ManualClock clock;
  Start(clock, /*batch_timeout_micros=*/1'000'000);
  constexpr int kEach = 4;
  for (int n = 0; n < kEach; ++n) Embed(n);
  WriteConfig(kNewMaxLength, testing::ModelDir() + "/model.onnx");
  const auto reload = Reload();
  ASSERT_TRUE(reload && reload->ok()) << Describe(reload);
  for (int n = kEach; n < 2 * kEach; ++n) Embed(n);  // These go to the new copy.
  EXPECT_EQ(answers_.total(), 0) << "nothing runs before the clock moves";

  // The old copy is draining now (the reload waits for what it admitted); both queues run
  // once their batch timeout has passed.
  clock.AdvanceMicros(1'000'000);
  ASSERT_TRUE(answers_.WaitForTotal(2 * kEach)) << answers_.total() << " answers";
  service_.reset();  // Nothing can answer any more: the counts below are final.
  const auto entries = answers_.entries();
  ASSERT_EQ(entries.size(), 2u * kEach);
  for (const auto& [n, e] : entries) {
    EXPECT_EQ(e.calls, 1) << "request " << n;
    ASSERT_TRUE(e.ok) << "request " << n << ": " << e.error;
    EXPECT_EQ(e.tokens, n < kEach ? kOldMaxLength : kNewMaxLength) << "request " << n;
  }
}

TEST_F(InferenceServiceReloadTest, ReloadUnderLoadAnswersEveryRequestExactlyOnce) {
  Start(SystemClock::Get(), /*batch_timeout_micros=*/0);
  WriteConfig(kNewMaxLength, testing::ModelDir() + "/model.onnx");
  // Clients send without waiting for answers (a few in flight each) until the reload has
  // answered, then a few more each, all of which must reach the new copy.
  constexpr int kClients = 4, kInFlight = 4, kAfter = 3;
  std::atomic<bool> reloaded{false};
  std::atomic<int> next{0};
  std::mutex after_mutex;
  std::vector<int> sent_after;  // Requests sent once the reload had answered.
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&] {
      // At most kInFlight of this client's requests unanswered.
      std::mutex mutex;
      std::condition_variable answered;
      int in_flight = 0, after = 0;
      while (after < kAfter) {
        const bool was_reloaded = reloaded.load();
        {
          std::unique_lock<std::mutex> lock(mutex);
          answered.wait(lock, [&] { return in_flight < kInFlight; });
          ++in_flight;
        }
        const int n = next++;
        EmbedRequest r;
        r.model = "minilm";
        r.inputs = {Text(n)};
        service_->Embed(std::move(r), [&, record = answers_.For(n)](Result<EmbedResult> res) {
          record(std::move(res));
          std::lock_guard<std::mutex> lock(mutex);
          --in_flight;
          answered.notify_all();
        });
        if (was_reloaded) {
          ++after;
          std::lock_guard<std::mutex> lock(after_mutex);
          sent_after.push_back(n);
        }
      }
      // Its last answers touch `mutex` and `answered`: wait for them before they go.
      std::unique_lock<std::mutex> lock(mutex);
      answered.wait(lock, [&] { return in_flight == 0; });
    });
  }
  const auto reload = Reload();
  reloaded = true;
  for (auto& t : clients) t.join();
  ASSERT_TRUE(reload && reload->ok()) << Describe(reload);
  const int sent = next.load();
  ASSERT_TRUE(answers_.WaitForTotal(sent)) << answers_.total() << " of " << sent << " answers";
  service_.reset();
  const auto entries = answers_.entries();
  ASSERT_EQ(static_cast<int>(entries.size()), sent);
  int old_copy = 0, new_copy = 0;
  for (const auto& [n, e] : entries) {
    EXPECT_EQ(e.calls, 1) << "request " << n;
    ASSERT_TRUE(e.ok) << "request " << n << ": " << e.error;
    EXPECT_TRUE(e.tokens == kOldMaxLength || e.tokens == kNewMaxLength) << e.tokens;
    (e.tokens == kOldMaxLength ? old_copy : new_copy)++;
  }
  for (int n : sent_after) {
    EXPECT_EQ(entries.at(n).tokens, kNewMaxLength) << "request " << n << " after the reload";
  }
  EXPECT_GE(new_copy, kClients * kAfter);
  RecordProperty("answered_by_old_copy", old_copy);
  RecordProperty("answered_by_new_copy", new_copy);
}

TEST_F(InferenceServiceReloadTest, FailedReloadLeavesTheOldCopyServing) {
  Start(SystemClock::Get(), /*batch_timeout_micros=*/0);
  // Each broken in another way: a file that is no model, a config that does not parse, a
  // config that renames the model.
  const std::string corrupt = (repo_ / "corrupt.onnx").string();
  std::ofstream(corrupt) << "this is not an ONNX model";
  const std::vector<std::function<void()>> breakages = {
      [&] { WriteConfig(kNewMaxLength, corrupt); },
      [&] { std::ofstream(folder_ / "model.yaml") << "name: [unterminated\n"; },
      [&] { WriteConfig(kNewMaxLength, testing::ModelDir() + "/model.onnx", "renamed"); },
  };
  int n = 0;
  for (const auto& breakage : breakages) {
    breakage();
    const auto s = Reload();
    ASSERT_TRUE(s.has_value()) << "breakage " << n << ": the reload never answered";
    EXPECT_FALSE(s->ok()) << "breakage " << n;
    Embed(n);
    ASSERT_TRUE(answers_.WaitForTotal(n + 1));
    const auto e = answers_.entries().at(n);
    ASSERT_TRUE(e.ok) << e.error;
    EXPECT_EQ(e.tokens, kOldMaxLength) << "served by the old copy";
    auto d = service_->DescribeModel("minilm");
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(d->state, ModelState::kReady);
    ++n;
  }
  // And a good reload after them all still works.
  WriteConfig(kNewMaxLength, testing::ModelDir() + "/model.onnx");
  const auto reload = Reload();
  ASSERT_TRUE(reload && reload->ok()) << Describe(reload);
  Embed(n);
  ASSERT_TRUE(answers_.WaitForTotal(n + 1));
  EXPECT_EQ(answers_.entries().at(n).tokens, kNewMaxLength);
}

}  // namespace
}  // namespace tailcut
