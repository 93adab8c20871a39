// PrecisionController: chooses which precision variant of a model serves requests that do
// not pin one, from load signals, with hysteresis and a minimum dwell time so it never
// flaps. Pure decision logic with an injected clock: the servable feeds it signals once per
// evaluation interval and applies its answer; tests drive it by hand.
//
// Two policies:
//  - slo (default): serve the accurate variant while there is headroom; switch to the fast
//    one when the recent P99 approaches the SLO (>= degrade_at_slo_fraction of it) or the
//    inference worker is nearly saturated; come back only when the accurate variant is
//    predicted to fit comfortably: the current P99 and utilisation scaled by how much
//    slower the accurate variant is (measured) stay under restore thresholds, and the
//    accurate variant's cache already holds what the fast one answered.
//  - thresholds: the source article's rule, expressed as configuration: fast when
//    rate >= fast_at_rate_per_s AND memory use > fast_at_memory_used_fraction; accurate when
//    rate <= accurate_at_rate_per_s AND free memory >= accurate_at_memory_free_bytes;
//    otherwise stay.
//  - prefill (generative models): the "accurate" end is the default GGUF variant, the "fast"
//    one the variant that prefills faster; move to it when prompt tokens are at least
//    degrade_at_prefill_percent of the tokens the model ran in the window (over at least
//    min_window_tokens), back when they fall to restore_below_prefill_percent or the window
//    ran no tokens at all (idle: the default variant again).
// off pins the accurate variant.
//
// Thread-safety: not thread-safe; one owner calls Update() (the servable's controller tick).
#pragma once

#include <cstdint>
#include <string>

#include "common/clock.h"

namespace tailcut {

struct LoadSignals {
  double request_rate_per_s = 0;  // Recent request arrivals.
  int64_t p99_micros = 0;         // Recent server-side latency (arrival to answer).
  int64_t samples = 0;            // Requests behind p99_micros.
  double utilization = 0;         // Share of recent wall time the inference worker was busy.
  double memory_used_fraction = 0;
  int64_t memory_free_bytes = 0;
  // How many times slower the accurate variant is than the fast one per token (measured;
  // 1 until both have run).
  double accurate_slowdown = 1.0;
  // Inputs the fast variant answered whose accurate rows are not cached yet (the servable's
  // reference backfill still owes them). slo does not come back while any are owed: each
  // would turn into a miss at the moment of switching, all at once for the hottest inputs,
  // and that burst is enough load to send the controller straight back.
  int64_t reference_rows_owed = 0;
  // Generative models (mode prefill): tokens the step loops decoded in the window, and the
  // share of them that were prompt tokens (prefill) rather than generated ones.
  int64_t window_tokens = 0;
  double prefill_share = 0;
};

struct PrecisionPolicy {
  // "slo" (default), "thresholds" (the source's rule), "prefill" (generative models) or "off"
  // (pin the accurate variant).
  // Integers and percentages throughout, so every field maps onto a configuration key.
  std::string mode = "slo";
  // Variant names (or precision aliases such as "int8") the controller moves between.
  std::string accurate_variant = "fp32";
  std::string fast_variant = "int8";
  // slo: the latency objective and the hysteresis band around it. Degrade at 80 % of the
  // SLO so the switch lands before the objective is missed; restore only when the accurate
  // variant is predicted under 50 %, which keeps the two thresholds far apart.
  int64_t slo_p99_micros = 86'000;
  int64_t degrade_at_slo_percent = 80;
  int64_t restore_below_slo_percent = 50;
  // slo: worker utilisation that means the queue is about to grow without bound, and the
  // utilisation the accurate variant must be predicted to stay under to come back.
  int64_t degrade_at_utilization_percent = 90;
  int64_t restore_below_utilization_percent = 60;
  // slo: P99 of fewer requests than this is noise; no decision is taken on it.
  int64_t min_samples = 50;
  // thresholds: the source's rule.
  int64_t fast_at_rate_per_s = 120;
  int64_t fast_at_memory_used_percent = 85;
  int64_t accurate_at_rate_per_s = 40;
  int64_t accurate_at_memory_free_bytes = 3LL << 30;
  // Which variants the controller may move to (src/core/variant_eligibility.h): only
  // batch-invariant ones whose measured fidelity to fp32 (model.yaml, from
  // tools/quantize_model.py's fixed check set) is at least this, in parts per million
  // (985000 = 0.985). The floor is what "the same vector space" means for the model's users.
  // The defaults admit all-MiniLM-L6-v2's int8-per-token (min cosine 0.9888, recall@10
  // 0.943 on the check set; worst of 20k QQP questions 0.9867) and refuse int8-static (0.971
  // / 0.878); raise them if users compare vectors closely across time, lower them (or waive
  // them) only knowingly.
  int64_t min_fidelity_cosine_ppm = 985'000;
  int64_t min_fidelity_recall_at_10_ppm = 930'000;
  // Classifiers (a variant with a measured top1_agreement in model.yaml): the share of check
  // images whose top-1 class must equal fp32's, in ppm. The default admits the image model's
  // int8-static (71 of 72 check images, 0.986) and would refuse a variant that changed two.
  // The check set is small, so this catches a broken variant, not a 1-point drift.
  int64_t min_top1_agreement_ppm = 980'000;
  // Operator opt-in: also move to a batch-invariant variant below the floor (or unmeasured).
  // Batch invariance is never waived.
  bool allow_below_fidelity_floor = false;
  // prefill: the hysteresis band on LoadSignals::prefill_share, and the least evidence.
  int64_t degrade_at_prefill_percent = 75;
  int64_t restore_below_prefill_percent = 60;
  int64_t min_window_tokens = 256;
  // All: no switch within this long of the previous one (anti-flapping).
  int64_t min_dwell_micros = 10'000'000;
};

class PrecisionController {
 public:
  PrecisionController(const PrecisionPolicy& policy, const Clock& clock);

  // Feeds one observation; returns true when the choice changed (then see on_fast()).
  bool Update(const LoadSignals& signals);
  // True while the fast variant is chosen.
  bool on_fast() const { return on_fast_; }
  const std::string& current_variant() const {
    return on_fast_ ? policy_.fast_variant : policy_.accurate_variant;
  }
  int64_t switches() const { return switches_; }
  const PrecisionPolicy& policy() const { return policy_; }
  // Why the last switch happened, for logs.
  const std::string& last_reason() const { return last_reason_; }

 private:
  bool WantFast(const LoadSignals& s, std::string* reason) const;
  bool WantAccurate(const LoadSignals& s, std::string* reason) const;

  const PrecisionPolicy policy_;
  const Clock& clock_;
  bool on_fast_ = false;
  int64_t last_switch_micros_;
  int64_t switches_ = 0;
  std::string last_reason_;
};

// Reads /proc/meminfo: (used fraction, available bytes) of the machine.
bool ReadSystemMemory(double* used_fraction, int64_t* available_bytes);

}  // namespace tailcut
