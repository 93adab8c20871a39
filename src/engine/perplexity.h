// Perplexity of a GenerativeModel over a text, computed by tailcut through the GenerativeModel
// interface alone (Tokenize, Decode with logits for the positions scored), the way llama.cpp's
// perplexity tool does it, so the two give comparable numbers:
//
//   - the text is tokenised once (with BOS where the model's tokenizer adds one) and cut into
//     consecutive, non-overlapping windows of `window_tokens` tokens; the tail that does not
//     fill a window is dropped;
//   - each window is decoded from an empty cache (its first token replaced by BOS when the
//     model uses one, so every window starts the way a prompt does);
//   - only the second half of each window is scored: position j predicts token j + 1 for j
//     from window/2 to window - 2, so every scored token sees at least half a window of context
//     and early, context-starved tokens do not dominate the mean.
//
// The result is the mean negative log-likelihood (natural log) of the scored tokens and its
// exponential, the perplexity. Lower is better; a model that had learnt nothing would score
// about the vocabulary size (49,152 for SmolLM2).
//
// Thread-safety: ComputePerplexity drives the model's step loop (Decode, ClearCache): call it
// from the thread that owns the model, never while it serves requests. It clears the model's
// KV cache before each window and leaves it empty.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "common/status.h"
#include "engine/generative_model.h"

namespace tailcut {

struct PerplexityOptions {
  // Tokens per window: at least 16, at most the model's context_tokens(). 512 is llama.cpp's
  // perplexity default, so numbers at 512 compare with its published ones.
  int32_t window_tokens = 512;
  // Stop after this many windows (0: all that fit), to bound the time on a long text.
  int32_t max_windows = 0;
};

struct PerplexityResult {
  int64_t text_tokens = 0;    // Tokens in the whole text (BOS included where added).
  int32_t window_tokens = 0;  // As used.
  int32_t windows = 0;        // Windows decoded.
  int64_t scored_tokens = 0;  // Tokens whose log-likelihood is in the mean.
  double mean_nll = 0;        // Mean negative log-likelihood per scored token, nats.
  double perplexity = 0;      // exp(mean_nll).
  double seconds = 0;         // Wall time of the decoding and scoring.
};

// Perplexity over `tokens` (already tokenised; tokens[0] is taken as a window start like any
// other). Fails with kInvalidArgument when window_tokens is out of range or the tokens do not
// fill one window, and passes on a failed Decode's status.
Result<PerplexityResult> ComputePerplexity(GenerativeModel& model, std::span<const TokenId> tokens,
                                           const PerplexityOptions& options);

// Tokenises `text` as llama.cpp's perplexity tool does (special tokens added the model's way,
// their text not parsed) and computes the perplexity over it.
Result<PerplexityResult> ComputeTextPerplexity(GenerativeModel& model, std::string_view text,
                                               const PerplexityOptions& options);

}  // namespace tailcut
