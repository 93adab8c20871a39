// TimedGenerativeModel: a real GenerativeModel whose steps take a stated time on a ManualClock
// (fixed + per token, whatever the machine), so that the step scheduler's time-based choices
// (the step time bound, the first-token target) can be tested exactly. Every call goes to the
// wrapped model; Decode() also advances the clock and records each step's tokens per
// sequence.
//
// Thread-safety: as the wrapped model's (Decode on the step loop); steps() and clock() from
// any thread.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "engine/generative_model.h"

namespace tailcut {
namespace testing {

class TimedGenerativeModel final : public GenerativeModel {
 public:
  // One Decode() of n tokens takes fixed_micros + micros_per_token x n on `clock`.
  TimedGenerativeModel(std::unique_ptr<GenerativeModel> model, ManualClock& clock,
                       int64_t fixed_micros, int64_t micros_per_token)
      : model_(std::move(model)),
        clock_(clock),
        fixed_micros_(fixed_micros),
        micros_per_token_(micros_per_token) {}

  // Every `every`-th Decode() from now on takes `extra_micros` more (a preempted thread, a
  // noisy neighbour): what the fitted step time cannot predict.
  void SetExtraMicrosEvery(int every, int64_t extra_micros) {
    std::lock_guard<std::mutex> lock(mu_);
    extra_every_ = every;
    extra_micros_ = extra_micros;
  }

  // Per step, in order: the tokens of each sequence in it.
  std::vector<std::map<SequenceId, int>> steps() const {
    std::lock_guard<std::mutex> lock(mu_);
    return steps_;
  }

  Result<DecodeLogits> Decode(const DecodeBatch& batch) override {
    auto logits = model_->Decode(batch);
    std::map<SequenceId, int> step;
    for (const DecodeEntry& e : batch.entries) ++step[e.sequence];
    int64_t extra = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      steps_.push_back(std::move(step));
      if (extra_every_ > 0 && ++since_extra_ == extra_every_) {
        since_extra_ = 0;
        extra = extra_micros_;
      }
    }
    clock_.AdvanceMicros(fixed_micros_ + micros_per_token_ * static_cast<int64_t>(batch.size()) +
                         extra);
    return logits;
  }

  const std::string& path() const override { return model_->path(); }
  const std::string& description() const override { return model_->description(); }
  int32_t vocab_size() const override { return model_->vocab_size(); }
  int32_t trained_context_tokens() const override { return model_->trained_context_tokens(); }
  int32_t context_tokens() const override { return model_->context_tokens(); }
  int32_t sequence_context_tokens() const override { return model_->sequence_context_tokens(); }
  KvCacheLayout kv_cache_layout() const override { return model_->kv_cache_layout(); }
  int32_t max_sequences() const override { return model_->max_sequences(); }
  int32_t batch_tokens() const override { return model_->batch_tokens(); }
  Result<std::vector<TokenId>> Tokenize(std::string_view text, bool add_special,
                                        bool parse_special) const override {
    return model_->Tokenize(text, add_special, parse_special);
  }
  std::string TokenToPiece(TokenId token, bool render_special) const override {
    return model_->TokenToPiece(token, render_special);
  }
  Result<std::string> Detokenize(std::span<const TokenId> tokens,
                                 bool render_special) const override {
    return model_->Detokenize(tokens, render_special);
  }
  Result<std::string> ApplyChatTemplate(std::span<const ChatMessage> messages,
                                        bool add_generation_prompt) const override {
    return model_->ApplyChatTemplate(messages, add_generation_prompt);
  }
  TokenId bos_token() const override { return model_->bos_token(); }
  TokenId eos_token() const override { return model_->eos_token(); }
  TokenId eot_token() const override { return model_->eot_token(); }
  bool IsEndOfGeneration(TokenId token) const override { return model_->IsEndOfGeneration(token); }
  TokenPosition SequenceLength(SequenceId sequence) const override {
    return model_->SequenceLength(sequence);
  }
  Status RemoveSequence(SequenceId sequence) override { return model_->RemoveSequence(sequence); }
  Status RemoveTokens(SequenceId sequence, TokenPosition begin, TokenPosition end) override {
    return model_->RemoveTokens(sequence, begin, end);
  }
  Status CopyPrefix(SequenceId source, SequenceId destination, TokenPosition length) override {
    return model_->CopyPrefix(source, destination, length);
  }
  void ClearCache() override { model_->ClearCache(); }
  KvCacheUsage CacheUsage() const override { return model_->CacheUsage(); }

 private:
  const std::unique_ptr<GenerativeModel> model_;
  ManualClock& clock_;
  const int64_t fixed_micros_;
  const int64_t micros_per_token_;
  mutable std::mutex mu_;  // Guards steps_ and the extra time.
  std::vector<std::map<SequenceId, int>> steps_;
  int extra_every_ = 0;
  int64_t extra_micros_ = 0;
  int since_extra_ = 0;
};

}  // namespace testing
}  // namespace tailcut
