// GenerationPrecision: which precision variant (GGUF file) of a generative model serves a
// request, the generative counterpart of the embedding servable's variant choice. A request
// that pins a variant (by name, or by precision alias: the GGUF weight type "q8_0") gets it;
// one that pins none gets the active variant, which the precision controller
// (core/precision_controller.h, mode "prefill") moves between the default variant and the one
// that prefills faster, by the prefill share of the load. A sequence runs wholly on the
// variant chosen at admission (each variant has its own engine context and step loop), so a
// switch only changes where new requests go, and every answer names its variant.
//
// Why the prefill share: the same weights in Q8_0 prefill faster than in the shipped Q4_1 and
// decode slower (issue 12: llama-bench, 2 threads, Q4_1 215 / 111 tok/s prefill / decode, Q8_0
// 335 / 79), so a request of P prompt and G generated tokens costs less on Q8_0 when
// P/215 - P/335 > G/79 - G/111, i.e. P > 2.2 G: a prompt share P/(P+G) above 69 %. The default
// band (75 % / 60 %) sits around it. tests/core/generation_precision_test.cc and BENCHMARKS.md
// ("Generative precision variants") have the step times measured here.
//
// Only variants the quality rule admits are moved to: measured perplexity within
// max_perplexity_increase_ppm of the default's (CheckPerplexityWithin); others are served
// only when pinned.
//
// Thread-safety: Choose(), active() and Describe-side getters are safe from any thread;
// Tick() from one thread at a time (the servable's controller thread, or a test).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "core/precision_controller.h"
#include "engine/model_config.h"

namespace tailcut {

// Cumulative token counts of one variant's step loop (GenerationSchedulerStats).
struct VariantTokens {
  int64_t prompt_tokens = 0;     // Prompt tokens decoded (prefill).
  int64_t generated_tokens = 0;  // Generated tokens decoded.
};

class GenerationPrecision {
 public:
  // `variants` as model.yaml lists them; `loaded[i]` whether variant i's file loaded;
  // `default_index` the default variant (loaded).
  GenerationPrecision(std::vector<VariantConfig> variants, std::vector<bool> loaded,
                      int default_index, const GenerativePrecisionConfig& config,
                      const Clock& clock);

  // The variant of a request: `pin` (a name, else a precision alias: the first loaded variant
  // of that precision) or, when empty, the active one. InvalidArgument naming the loaded
  // variants when `pin` matches none.
  Result<int> Choose(const std::string& pin) const;
  int active() const { return active_.load(std::memory_order_relaxed); }

  // Feeds the step loops' cumulative counts (index-aligned with the variants); returns true
  // when the active variant changed (then see active() and last_reason()).
  bool Tick(const std::vector<VariantTokens>& totals);

  // The controller's two ends (-1 when it is off), what it does or why it is off, how often
  // it switched, and the policy name for Describe() ("off" or "prefill").
  int default_index() const { return default_index_; }
  int prefill_index() const { return prefill_index_; }
  const std::string& note() const { return note_; }
  const std::string& policy_name() const { return policy_name_; }
  int64_t switches() const { return controller_ ? controller_->switches() : 0; }
  std::string last_reason() const { return controller_ ? controller_->last_reason() : ""; }
  int64_t interval_micros() const { return interval_micros_; }
  // Whether the controller may serve variant i to unpinned requests, else why not.
  Status Eligible(int i) const;
  // The last tick's window: tokens run and their prompt share.
  int64_t window_tokens() const { return window_tokens_.load(); }

 private:
  const std::vector<VariantConfig> variants_;
  const std::vector<bool> loaded_;
  const int default_index_;
  const GenerativePrecisionConfig config_;
  const Clock& clock_;
  const int64_t interval_micros_;
  int prefill_index_ = -1;
  std::string note_;
  std::string policy_name_ = "off";
  std::unique_ptr<PrecisionController> controller_;
  std::atomic<int> active_;
  std::atomic<int64_t> window_tokens_{0};
  // Tick's own: (time, summed prompt tokens, summed generated tokens), oldest first.
  struct Snapshot {
    int64_t micros;
    int64_t prompt;
    int64_t generated;
  };
  std::deque<Snapshot> history_;
};

}  // namespace tailcut
