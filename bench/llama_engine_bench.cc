// llama_engine_bench: the generative engine's raw speed through GenerativeModel, with no
// server, scheduler or sampling around it (greedy argmax), so later layers can be compared
// with what the engine alone does on the same machine.
//
//   prefill  one prompt of --prompt-tokens tokens in one Decode(): tokens/s
//   decode   --sequences S (each list item) sequences, each prefilled with a 32-token prompt,
//            then --decode-tokens steps of one token per sequence: generated tokens/s over
//            all sequences, and the time per step
//   mixed    the same decode steps with a --mixed-chunk-tokens prompt chunk of one more
//            sequence in every step (what a step looks like while a prompt is prefilled):
//            the time per step, to set beside the decode-only one
//
// Each measurement is repeated --repeats times from an empty cache; the median is reported.
// Usage: build/bench/llama_engine_bench [--model FILE] [--threads 2] [--prompt-tokens 256]
//        [--decode-tokens 64] [--sequences 1,8] [--repeats 3] [--kv-cache per_sequence|shared]
//        [--mixed-chunk-tokens 0]                                  (prints text and a JSON line)
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "engine/generative_model.h"

using namespace tailcut;

namespace {

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

TokenId Argmax(std::span<const float> row) {
  return static_cast<TokenId>(std::max_element(row.begin(), row.end()) - row.begin());
}

// `count` tokens of ordinary English text (repeated as needed).
std::vector<TokenId> PromptTokens(const GenerativeModel& model, size_t count) {
  const std::string text =
      "The harbour was quiet in the early morning, and the fishing boats rocked gently on "
      "the grey water while the gulls argued over scraps along the pier. ";
  std::vector<TokenId> one = *model.Tokenize(text, false, false);
  std::vector<TokenId> out;
  while (out.size() < count) out.insert(out.end(), one.begin(), one.end());
  out.resize(count);
  return out;
}

bool Check(const Result<DecodeLogits>& r) {
  if (!r.ok()) std::fprintf(stderr, "decode failed: %s\n", r.status().ToString().c_str());
  return r.ok();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Raw prefill and decode speed of the generative engine"};
  std::string model_path =
      std::string(TAILCUT_MODELS_DIR) + "/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf";
  int threads = 2, prompt_tokens = 256, decode_tokens = 64, repeats = 3;
  std::vector<int> sequence_counts = {1, 8};
  std::string kv_cache = "per_sequence";
  int mixed_chunk_tokens = 0;
  app.add_option("--model", model_path, "GGUF file");
  app.add_option("--threads", threads, "decode_threads and batch_threads");
  app.add_option("--prompt-tokens", prompt_tokens, "Prefill prompt length");
  app.add_option("--decode-tokens", decode_tokens, "Steps per decode measurement");
  app.add_option("--sequences", sequence_counts, "Sequence counts to decode with")->delimiter(',');
  app.add_option("--repeats", repeats, "Repetitions of each measurement (median reported)");
  app.add_option("--kv-cache", kv_cache, "KV-cache layout: per_sequence or shared")
      ->check(CLI::IsMember({"per_sequence", "shared"}));
  app.add_option("--mixed-chunk-tokens", mixed_chunk_tokens,
                 "Also time decode steps that carry a prompt chunk of this many tokens (0: no)");
  CLI11_PARSE(app, argc, argv);

  GenerativeModelOptions options;
  options.decode_threads = threads;
  options.batch_threads = threads;
  // One more sequence than the largest count: the one whose prompt the mixed steps prefill.
  options.max_sequences =
      1 + std::max(1, *std::max_element(sequence_counts.begin(), sequence_counts.end()));
  options.kv_cache_layout =
      kv_cache == "shared" ? KvCacheLayout::kShared : KvCacheLayout::kPerSequence;
  // Every sequence's 32-token prompt goes in one batch before the decode steps.
  options.batch_tokens = std::max({512, prompt_tokens, 32 * options.max_sequences});
  // Room in every sequence's share for the longest of them: the mixed steps' prompt.
  const int per_sequence_tokens = std::max(512, (mixed_chunk_tokens + 1) * decode_tokens + 64);
  options.context_tokens = std::max(4096, options.max_sequences * per_sequence_tokens);
  auto loaded = LoadGenerativeModel(model_path, options);
  if (!loaded.ok()) {
    std::fprintf(stderr, "%s\n", loaded.status().ToString().c_str());
    return 1;
  }
  GenerativeModel& model = **loaded;
  std::printf("model: %s (%s), threads %d, kv_cache %s\n", model_path.c_str(),
              model.description().c_str(), threads, kv_cache.c_str());

  // Warm-up: the first decodes pay for buffer allocation and graph building.
  {
    DecodeBatch batch;
    batch.AddTokens(PromptTokens(model, 64), 0, 0, true);
    if (!Check(model.Decode(batch))) return 1;
    model.ClearCache();
  }

  const std::vector<TokenId> prompt = PromptTokens(model, static_cast<size_t>(prompt_tokens));
  std::vector<double> prefill;
  for (int r = 0; r < repeats; ++r) {
    model.ClearCache();
    DecodeBatch batch;
    batch.AddTokens(prompt, 0, 0, true);
    const auto t0 = std::chrono::steady_clock::now();
    if (!Check(model.Decode(batch))) return 1;
    prefill.push_back(prompt_tokens / Seconds(t0));
  }
  const double prefill_tps = Median(prefill);
  std::printf("prefill %d tokens: %.0f tokens/s (median of %d)\n", prompt_tokens, prefill_tps,
              repeats);

  std::string json = "{\"bench\":\"llama_engine\",\"threads\":" + std::to_string(threads) +
                     ",\"prefill_tokens\":" + std::to_string(prompt_tokens) +
                     ",\"prefill_tokens_per_s\":" + std::to_string(prefill_tps);
  const std::vector<TokenId> short_prompt = PromptTokens(model, 32);
  // Decode steps of `sequences` sequences, each step also carrying `chunk` prompt tokens of
  // sequence `sequences` (0: none); the median time per step over the repeats.
  const std::vector<TokenId> long_prompt =
      PromptTokens(model, static_cast<size_t>(std::max(1, mixed_chunk_tokens)) *
                              static_cast<size_t>(decode_tokens));
  auto time_steps = [&](int sequences, int chunk) -> double {
    std::vector<double> step_ms;
    for (int r = 0; r < repeats; ++r) {
      model.ClearCache();
      DecodeBatch batch;
      for (SequenceId s = 0; s < sequences; ++s) batch.AddTokens(short_prompt, 0, s, true);
      auto logits = model.Decode(batch);
      if (!Check(logits)) return -1;
      std::vector<TokenId> next(static_cast<size_t>(sequences));
      for (int32_t row = 0; row < sequences; ++row) next[row] = Argmax(logits->Row(row));
      const auto t0 = std::chrono::steady_clock::now();
      for (int step = 0; step < decode_tokens; ++step) {
        batch.Clear();
        for (SequenceId s = 0; s < sequences; ++s) {
          batch.Add(next[static_cast<size_t>(s)], model.SequenceLength(s), s, true);
        }
        if (chunk > 0) {
          const auto first = long_prompt.begin() + static_cast<ptrdiff_t>(step) * chunk;
          batch.AddTokens(std::vector<TokenId>(first, first + chunk), step * chunk, sequences,
                          false);
        }
        logits = model.Decode(batch);
        if (!Check(logits)) return -1;
        for (int32_t row = 0; row < sequences; ++row) next[row] = Argmax(logits->Row(row));
      }
      step_ms.push_back(1000.0 * Seconds(t0) / decode_tokens);
    }
    return Median(step_ms);
  };
  for (int sequences : sequence_counts) {
    const double ms = time_steps(sequences, 0);
    if (ms < 0) return 1;
    const double tps = 1000.0 * sequences / ms;
    std::printf("decode %d sequence(s) x %d tokens: %.0f tokens/s, %.2f ms/step (median of %d)\n",
                sequences, decode_tokens, tps, ms, repeats);
    json += ",\"decode_" + std::to_string(sequences) + "_tokens_per_s\":" + std::to_string(tps) +
            ",\"decode_" + std::to_string(sequences) + "_ms_per_step\":" + std::to_string(ms);
    if (mixed_chunk_tokens > 0) {
      const double mixed_ms = time_steps(sequences, mixed_chunk_tokens);
      if (mixed_ms < 0) return 1;
      std::printf("  with a %d-token prompt chunk per step: %.2f ms/step\n", mixed_chunk_tokens,
                  mixed_ms);
      json +=
          ",\"mixed_" + std::to_string(sequences) + "_ms_per_step\":" + std::to_string(mixed_ms);
    }
  }
  std::printf("%s}\n", json.c_str());
  return 0;
}
