// Sampler: picks the next token of one sequence from the logits row Decode() gave for it, per
// the request's sampling parameters (the OpenAI set: temperature, top_p, top_k, seed,
// presence and frequency penalties). One sampler per sequence, created when the request
// starts: it remembers the tokens it picked (for the penalties) and owns its random stream, so
// a seeded request samples the same tokens whatever else shares its batches.
//
// The order is the one vLLM and Hugging Face use: penalties, temperature, top_k, top_p, then a
// draw from what is left. temperature == 0 is greedy (the highest penalised logit, the lowest
// id on a tie); top_k, top_p and the seed then play no part.
//
// Thread-safety: a Sampler is not thread-safe; the step loop that owns its sequence uses it.
// CreateSampler is safe from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>

#include "common/status.h"
#include "engine/generative_model.h"

namespace tailcut {

struct SamplingParams {
  // Divides the logits before the draw: below 1 sharpens, above 1 flattens, 0 is greedy.
  // 0 .. 100.
  float temperature = 1.0f;
  // Nucleus sampling: keep the most likely tokens whose probabilities add up to top_p.
  // (0, 1]; 1 keeps all.
  float top_p = 1.0f;
  // Keep only the top_k most likely tokens; 0 keeps all.
  int32_t top_k = 0;
  // The random stream's seed; unset draws one, so the tokens differ from run to run.
  // (4294967295 is llama.cpp's "draw one" too, so it is not a fixed seed.)
  std::optional<uint32_t> seed;
  // Subtracted once from the logit of every token already picked: pushes towards new tokens.
  // -2 .. 2, as OpenAI bounds it.
  float presence_penalty = 0.0f;
  // Subtracted from a token's logit once per time it was picked: damps repetition. -2 .. 2.
  float frequency_penalty = 0.0f;
  // Whether Sample() also computes the picked token's log-probability (a softmax over the
  // whole vocabulary: a few tens of microseconds per token, so only when asked).
  bool compute_logprob = false;
};

struct SampledToken {
  TokenId token = kNoToken;
  // log P(token) under the model's own distribution (the raw logits, before penalties and
  // temperature, as OpenAI's and vLLM's logprobs are); 0 unless compute_logprob.
  float logprob = 0.0f;
};

class Sampler {
 public:
  virtual ~Sampler() = default;

  // Picks the next token from `logits` (one row of vocab-size floats, e.g.
  // DecodeLogits::Row) and records it as generated, for the penalties.
  virtual SampledToken Sample(std::span<const float> logits) = 0;
  // Records a token the sequence got without Sample() (forced by the caller), so the
  // penalties count it.
  virtual void Accept(TokenId token) = 0;
  virtual const SamplingParams& params() const = 0;
};

// A sampler for `params`; kInvalidArgument names the first parameter out of range.
Result<std::unique_ptr<Sampler>> CreateSampler(const SamplingParams& params);

}  // namespace tailcut
