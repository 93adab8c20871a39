// Sampler: the penalties, greedy choice and log-probabilities are ours (a few lines each, and
// the penalties follow OpenAI's definition over the generated tokens, where llama.cpp's count
// a fixed window); temperature, top_k, top_p and the seeded draw are llama.cpp's sampler
// chain, so seeded draws match what llama.cpp's own tools sample.
#include <llama.h>

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <vector>

#include "engine/sampler.h"

namespace tailcut {
namespace {

struct ChainDeleter {
  void operator()(llama_sampler* s) const { llama_sampler_free(s); }
};

// log softmax(logits)[token], in two passes with the maximum subtracted (no overflow).
float LogProb(std::span<const float> logits, TokenId token) {
  const float max = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (float l : logits) sum += std::exp(static_cast<double>(l - max));
  return static_cast<float>(static_cast<double>(logits[static_cast<size_t>(token)] - max) -
                            std::log(sum));
}

class LlamaSampler final : public Sampler {
 public:
  explicit LlamaSampler(const SamplingParams& params) : params_(params) {
    if (params_.temperature == 0.0f) return;  // Greedy: no chain, no random stream.
    chain_.reset(llama_sampler_chain_init(llama_sampler_chain_default_params()));
    llama_sampler_chain_add(chain_.get(), llama_sampler_init_temp(params_.temperature));
    if (params_.top_k > 0) {
      llama_sampler_chain_add(chain_.get(), llama_sampler_init_top_k(params_.top_k));
    }
    if (params_.top_p < 1.0f) {
      llama_sampler_chain_add(chain_.get(), llama_sampler_init_top_p(params_.top_p, 1));
    }
    llama_sampler_chain_add(chain_.get(),
                            llama_sampler_init_dist(params_.seed.value_or(LLAMA_DEFAULT_SEED)));
  }

  SampledToken Sample(std::span<const float> logits) override {
    SampledToken out;
    if (logits.empty()) return out;
    const bool penalised = !counts_.empty() && (params_.presence_penalty != 0.0f ||
                                                params_.frequency_penalty != 0.0f);
    if (!chain_) {
      out.token = penalised ? Greedy(Penalised(logits)) : Greedy(logits);
    } else {
      std::span<const float> source = penalised ? Penalised(logits) : logits;
      candidates_.resize(source.size());
      for (size_t i = 0; i < source.size(); ++i) {
        candidates_[i] = {static_cast<llama_token>(i), source[i], 0.0f};
      }
      llama_token_data_array array{candidates_.data(), candidates_.size(), -1, false};
      llama_sampler_apply(chain_.get(), &array);
      out.token = array.selected >= 0 ? array.data[array.selected].id : Greedy(source);
    }
    if (params_.compute_logprob) out.logprob = LogProb(logits, out.token);
    Accept(out.token);
    return out;
  }

  void Accept(TokenId token) override { ++counts_[token]; }

  const SamplingParams& params() const override { return params_; }

 private:
  static TokenId Greedy(std::span<const float> logits) {
    // max_element keeps the first of equal maxima: the lowest id wins a tie.
    return static_cast<TokenId>(std::max_element(logits.begin(), logits.end()) -
                                logits.begin());
  }

  // OpenAI: logit[t] -= count[t] * frequency_penalty + (count[t] > 0) * presence_penalty.
  std::span<const float> Penalised(std::span<const float> logits) {
    penalised_.assign(logits.begin(), logits.end());
    for (const auto& [token, count] : counts_) {
      if (token < 0 || static_cast<size_t>(token) >= penalised_.size()) continue;
      penalised_[static_cast<size_t>(token)] -=
          static_cast<float>(count) * params_.frequency_penalty + params_.presence_penalty;
    }
    return penalised_;
  }

  SamplingParams params_;
  std::unique_ptr<llama_sampler, ChainDeleter> chain_;
  std::unordered_map<TokenId, int32_t> counts_;  // Tokens generated so far, for the penalties.
  std::vector<llama_token_data> candidates_;      // Reused per call: one vocabulary's worth.
  std::vector<float> penalised_;
};

}  // namespace

Result<std::unique_ptr<Sampler>> CreateSampler(const SamplingParams& p) {
  auto bad = [](const std::string& what) {
    return Status::InvalidArgument("sampling parameter " + what);
  };
  if (!std::isfinite(p.temperature) || p.temperature < 0.0f || p.temperature > 100.0f) {
    return bad("temperature is " + std::to_string(p.temperature) + "; it must be in 0 .. 100");
  }
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) {
    return bad("top_p is " + std::to_string(p.top_p) + "; it must be in (0, 1]");
  }
  if (p.top_k < 0) return bad("top_k is " + std::to_string(p.top_k) + "; it must be >= 0");
  if (!(p.presence_penalty >= -2.0f && p.presence_penalty <= 2.0f)) {
    return bad("presence_penalty is " + std::to_string(p.presence_penalty) +
               "; it must be in -2 .. 2");
  }
  if (!(p.frequency_penalty >= -2.0f && p.frequency_penalty <= 2.0f)) {
    return bad("frequency_penalty is " + std::to_string(p.frequency_penalty) +
               "; it must be in -2 .. 2");
  }
  return std::unique_ptr<Sampler>(std::make_unique<LlamaSampler>(p));
}

}  // namespace tailcut
