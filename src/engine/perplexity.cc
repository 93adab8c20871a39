// perplexity.h: llama.cpp's perplexity scheme (examples/perplexity, perplexity()) over the
// GenerativeModel interface.
#include "engine/perplexity.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

namespace tailcut {
namespace {

constexpr int32_t kMinWindow = 16;

// -log softmax(row)[target], in double: the sum of 49,152 exponentials loses digits in float
// (they are shifted by the row's maximum first, so none overflows).
double NegativeLogLikelihood(std::span<const float> row, TokenId target) {
  const float max = *std::max_element(row.begin(), row.end());
  double sum = 0;
  for (float x : row) sum += std::exp(static_cast<double>(x - max));
  return std::log(sum) - static_cast<double>(row[static_cast<size_t>(target)] - max);
}

// Whether the model's tokenizer starts a text with BOS (llama.cpp's add_bos): the interface
// does not say, so a one-word text shows it.
bool AddsBos(const GenerativeModel& model) {
  if (model.bos_token() == kNoToken) return false;
  auto probe = model.Tokenize("a", true, false);
  return probe.ok() && !probe->empty() && probe->front() == model.bos_token();
}

}  // namespace

Result<PerplexityResult> ComputePerplexity(GenerativeModel& model, std::span<const TokenId> tokens,
                                           const PerplexityOptions& options) {
  const int32_t n = options.window_tokens;
  if (n < kMinWindow || n > model.context_tokens()) {
    return Status::InvalidArgument("PerplexityOptions.window_tokens is " + std::to_string(n) +
                                   "; it must be in " + std::to_string(kMinWindow) + " .. " +
                                   std::to_string(model.context_tokens()) +
                                   " (the model's context_tokens)");
  }
  if (options.max_windows < 0) {
    return Status::InvalidArgument("PerplexityOptions.max_windows is " +
                                   std::to_string(options.max_windows) + "; it must be >= 0");
  }
  int64_t windows = static_cast<int64_t>(tokens.size()) / n;
  if (windows == 0) {
    return Status::InvalidArgument("the text has " + std::to_string(tokens.size()) +
                                   " tokens, fewer than one window of " + std::to_string(n));
  }
  if (options.max_windows > 0) windows = std::min<int64_t>(windows, options.max_windows);

  const bool bos = AddsBos(model);
  // Scored: positions first .. n - 2 of each window, each predicting the token after it.
  const int32_t first = n / 2;
  const int32_t step = model.batch_tokens();
  const auto t0 = std::chrono::steady_clock::now();
  double nll_sum = 0;
  int64_t scored = 0;
  std::vector<TokenId> window(static_cast<size_t>(n));
  DecodeBatch batch;
  for (int64_t w = 0; w < windows; ++w) {
    const auto begin = tokens.begin() + static_cast<std::ptrdiff_t>(w * n);
    std::copy(begin, begin + n, window.begin());
    if (bos) window[0] = model.bos_token();
    model.ClearCache();
    // In pieces of batch_tokens() (a Decode takes no more), each piece's rows scored before
    // the next Decode overwrites them. Logits only where scored: the output layer is a fifth
    // of SmolLM2's weights, so skipping the unscored half saves a tenth of the work.
    for (int32_t c = 0; c < n; c += step) {
      const int32_t end = std::min(n, c + step);
      batch.Clear();
      for (int32_t j = c; j < end; ++j) {
        batch.Add(window[static_cast<size_t>(j)], j, 0, j >= first && j <= n - 2);
      }
      auto logits = model.Decode(batch);
      if (!logits.ok()) {
        model.ClearCache();
        return logits.status();
      }
      for (int32_t row = 0; row < logits->rows(); ++row) {
        const int32_t j = c + logits->EntryIndex(row);
        nll_sum += NegativeLogLikelihood(logits->Row(row), window[static_cast<size_t>(j) + 1]);
        ++scored;
      }
    }
  }
  model.ClearCache();

  PerplexityResult r;
  r.text_tokens = static_cast<int64_t>(tokens.size());
  r.window_tokens = n;
  r.windows = static_cast<int32_t>(windows);
  r.scored_tokens = scored;
  r.mean_nll = nll_sum / static_cast<double>(scored);
  r.perplexity = std::exp(r.mean_nll);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

Result<PerplexityResult> ComputeTextPerplexity(GenerativeModel& model, std::string_view text,
                                               const PerplexityOptions& options) {
  auto tokens = model.Tokenize(text, true, false);
  if (!tokens.ok()) return tokens.status();
  return ComputePerplexity(model, *tokens, options);
}

}  // namespace tailcut
