#include "core/generation_precision.h"

#include "core/variant_eligibility.h"

// The direction of the switch, measured here (build/bench/llama_engine_bench --threads 1
// --prompt-tokens 128 --decode-tokens 16 --sequences 1,4 --repeats 1, 3 interleaved rounds on
// 2 vCPUs at load average 7-8 from other builds; median and range, tok/s): prefill Q4_1 119
// (55-121), Q8_0 158 (81-216); one sequence decoding Q4_1 38 (31-60), Q8_0 70 (30-79); four
// sequences Q4_1 42 (33-76), Q8_0 82 (34-86). Prefill favours Q8_0 as the issue found; these
// noisy rounds do not resolve decode (BENCHMARKS.md had a tie at 37 tok/s), so going back to
// Q4_1 when generation dominates rests on the quiet run (111 against 79 tok/s) and on
// its smaller file; measure the band again on a quiet machine before relying on it.

namespace tailcut {
namespace {

PrecisionPolicy PolicyFor(const GenerativePrecisionConfig& c, const std::string& accurate,
                          const std::string& fast) {
  PrecisionPolicy p;
  p.mode = c.mode;
  p.accurate_variant = accurate;
  p.fast_variant = fast;
  p.degrade_at_prefill_percent = c.degrade_at_prefill_percent;
  p.restore_below_prefill_percent = c.restore_below_prefill_percent;
  p.min_window_tokens = c.min_window_tokens;
  p.min_dwell_micros = c.min_dwell_millis * 1000;
  return p;
}

}  // namespace

GenerationPrecision::GenerationPrecision(std::vector<VariantConfig> variants,
                                         std::vector<bool> loaded, int default_index,
                                         const GenerativePrecisionConfig& config,
                                         const Clock& clock)
    : variants_(std::move(variants)),
      loaded_(std::move(loaded)),
      default_index_(default_index),
      config_(config),
      clock_(clock),
      interval_micros_(config.interval_millis * 1000),
      active_(default_index) {
  if (variants_.size() < 2) {
    note_ = "off: the model has one variant";
    return;
  }
  if (config_.mode == "off") {
    note_ = "off by configuration (precision.mode off)";
    return;
  }
  std::string why;
  for (size_t i = 0; i < variants_.size(); ++i) {
    const VariantConfig& v = variants_[i];
    if (static_cast<int>(i) == default_index_) continue;
    if (!config_.prefill_variant.empty() && v.name != config_.prefill_variant &&
        v.precision != config_.prefill_variant) {
      continue;
    }
    Status s = Eligible(static_cast<int>(i));
    if (s.ok()) {
      prefill_index_ = static_cast<int>(i);
      break;
    }
    why += (why.empty() ? "" : "; ") + s.message();
  }
  const std::string& def = variants_[static_cast<size_t>(default_index_)].name;
  if (prefill_index_ < 0) {
    if (why.empty()) why = "no variant matches prefill_variant '" + config_.prefill_variant + "'";
    note_ = "off: no variant may serve in place of '" + def + "' (" + why + ")";
    return;
  }
  const std::string& fast = variants_[static_cast<size_t>(prefill_index_)].name;
  controller_ = std::make_unique<PrecisionController>(PolicyFor(config_, def, fast), clock_);
  policy_name_ = config_.mode;
  note_ = config_.mode + ": " + def + " <-> " + fast + " (prefill share >= " +
          std::to_string(config_.degrade_at_prefill_percent) + "% moves to " + fast +
          ", <= " + std::to_string(config_.restore_below_prefill_percent) + "% or idle back)";
}

Status GenerationPrecision::Eligible(int i) const {
  const VariantConfig& v = variants_[static_cast<size_t>(i)];
  if (i == default_index_) return Status::Ok();
  if (static_cast<size_t>(i) >= loaded_.size() || !loaded_[static_cast<size_t>(i)]) {
    return Status::FailedPrecondition("variant '" + v.name + "' failed to load");
  }
  return CheckPerplexityWithin(v, variants_[static_cast<size_t>(default_index_)],
                               config_.max_perplexity_increase_ppm);
}

Result<int> GenerationPrecision::Choose(const std::string& pin) const {
  if (pin.empty()) return active();
  for (size_t i = 0; i < variants_.size(); ++i) {
    if (loaded_[i] && variants_[i].name == pin) return static_cast<int>(i);
  }
  // A precision alias picks the first loaded variant of that precision (listed best first).
  for (size_t i = 0; i < variants_.size(); ++i) {
    if (loaded_[i] && !variants_[i].precision.empty() && variants_[i].precision == pin) {
      return static_cast<int>(i);
    }
  }
  std::string names;
  for (size_t i = 0; i < variants_.size(); ++i) {
    if (!loaded_[i]) continue;
    names += (names.empty() ? "" : ", ") + variants_[i].name;
    if (!variants_[i].precision.empty()) names += " (" + variants_[i].precision + ")";
  }
  return Status::InvalidArgument("model has no precision variant '" + pin +
                                 "'; available: " + names);
}

bool GenerationPrecision::Tick(const std::vector<VariantTokens>& totals) {
  if (!controller_) return false;
  const int64_t now = clock_.NowMicros();
  Snapshot snap{now, 0, 0};
  for (const VariantTokens& t : totals) {
    snap.prompt += t.prompt_tokens;
    snap.generated += t.generated_tokens;
  }
  history_.push_back(snap);
  // Keep one snapshot at or before the window's start as the baseline.
  const int64_t start = now - config_.window_seconds * 1'000'000;
  while (history_.size() > 1 && history_[1].micros <= start) history_.pop_front();
  const Snapshot& base = history_.front();
  LoadSignals s;
  const int64_t prompt = snap.prompt - base.prompt;
  const int64_t generated = snap.generated - base.generated;
  s.window_tokens = prompt + generated;
  s.prefill_share =
      s.window_tokens > 0 ? static_cast<double>(prompt) / static_cast<double>(s.window_tokens) : 0;
  window_tokens_ = s.window_tokens;
  // Until the window has filled once, no tokens is no evidence of idleness either.
  if (history_.size() == 1) return false;
  if (!controller_->Update(s)) return false;
  active_ = controller_->on_fast() ? prefill_index_ : default_index_;
  return true;
}

}  // namespace tailcut
