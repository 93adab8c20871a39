// generation_scheduler_bench: continuous batching through GenerationScheduler (tokenising,
// admission, sampling, detokenising, sink calls included), to set beside llama_engine_bench's
// raw engine numbers on the same machine.
//
// For each --sequences S: S greedy chat requests of --max-tokens tokens each (prompts of about
// 40 tokens with the template), submitted at once; reported: generated tokens/s over all of them (wall time from
// the first submission to the last end), time to first token (median, max) and the time
// between tokens of one sequence (median, p99), measured in the sinks.
// Usage: build/bench/generation_scheduler_bench [--model FILE] [--sequences 1,4,8]
//        [--max-tokens 64]
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "core/generation_scheduler.h"

using namespace tailcut;

namespace {

using Steady = std::chrono::steady_clock;

class TimingSink final : public GenerationSink {
 public:
  explicit TimingSink(Steady::time_point start) : start_(start) {}
  void OnStart(const GenerationStart&) override {}
  void OnText(const GenerationPiece&) override {
    const auto now = Steady::now();
    std::lock_guard<std::mutex> lock(mu_);
    if (last_ == Steady::time_point{}) {
      ttft_ = std::chrono::duration<double>(now - start_).count();
    } else {
      gaps_.push_back(std::chrono::duration<double>(now - last_).count());
    }
    last_ = now;
  }
  void OnEnd(Result<GenerationEnd> end) override {
    std::lock_guard<std::mutex> lock(mu_);
    ok_ = end.ok();
    tokens_ = end.ok() ? end->usage.completion_tokens : 0;
    done_ = true;
    cv_.notify_all();
  }
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return done_; });
  }
  double ttft() const { return ttft_; }
  const std::vector<double>& gaps() const { return gaps_; }
  int tokens() const { return tokens_; }
  bool ok() const { return ok_; }

 private:
  const Steady::time_point start_;
  std::mutex mu_;
  std::condition_variable cv_;
  Steady::time_point last_{};
  double ttft_ = 0;
  std::vector<double> gaps_;
  int tokens_ = 0;
  bool ok_ = false;
  bool done_ = false;
};

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1))];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Continuous batching speed of GenerationScheduler"};
  std::string model_path = std::string(TAILCUT_MODELS_DIR) +
                           "/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf";
  int max_tokens = 64;
  std::vector<int> sequence_counts = {1, 4, 8};
  app.add_option("--model", model_path, "GGUF file");
  app.add_option("--max-tokens", max_tokens, "Tokens generated per request");
  app.add_option("--sequences", sequence_counts, "Concurrent requests")->delimiter(',');
  CLI11_PARSE(app, argc, argv);

  GenerativeModelOptions options;
  options.context_tokens = 2048;
  options.max_sequences = *std::max_element(sequence_counts.begin(), sequence_counts.end());
  auto loaded = LoadGenerativeModel(model_path, options);
  if (!loaded.ok()) {
    std::fprintf(stderr, "%s\n", loaded.status().ToString().c_str());
    return 1;
  }
  GenerationScheduler scheduler(loaded->get(), GenerationSchedulerOptions{});
  std::printf("model: %s (%s), 1 thread, %d tokens per request\n", model_path.c_str(),
              (*loaded)->description().c_str(), max_tokens);
  for (int s : sequence_counts) {
    std::vector<std::shared_ptr<TimingSink>> sinks;
    const auto start = Steady::now();
    for (int i = 0; i < s; ++i) {
      auto sink = std::make_shared<TimingSink>(start);
      GenerateRequest r;
      // Chat: the instruct model answers this at length, so requests seldom end early.
      r.chat = true;
      r.messages = {{"user", "Request " + std::to_string(i) +
                                 ": write a long story about a lighthouse keeper and the sea."}};
      r.max_tokens = max_tokens;
      r.sampling.temperature = 0.0f;
      scheduler.Generate(std::move(r), sink);
      sinks.push_back(std::move(sink));
    }
    int tokens = 0;
    std::vector<double> ttfts, gaps;
    for (auto& sink : sinks) {
      sink->Wait();
      if (!sink->ok()) std::fprintf(stderr, "a request failed\n");
      tokens += sink->tokens();
      ttfts.push_back(sink->ttft());
      gaps.insert(gaps.end(), sink->gaps().begin(), sink->gaps().end());
    }
    const double wall = std::chrono::duration<double>(Steady::now() - start).count();
    std::printf("sequences %d: %d tokens in %.2f s = %.1f tokens/s; TTFT median %.1f ms, max "
                "%.1f ms; inter-token median %.1f ms, p99 %.1f ms\n",
                s, tokens, wall, tokens / wall, 1e3 * Quantile(ttfts, 0.5),
                1e3 * Quantile(ttfts, 1.0), 1e3 * Quantile(gaps, 0.5), 1e3 * Quantile(gaps, 0.99));
  }
  scheduler.Stop(/*drain=*/true);
  return 0;
}
