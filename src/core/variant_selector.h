// VariantSelector: which of a model's loaded precision variants serves each request. A
// request that pins one (by name or precision alias) gets it; the others get the active
// variant, which the precision controller moves between the accurate variant and the one
// fast variant interchangeable with it (variant_eligibility.h), or an administrator pins.
// The servable owns the variants themselves (sessions, models) and feeds the controller its
// load signals once per interval (Tick); the selector owns the choice, its metrics
// (tailcut_precision_active / _switches_total) and what a description says of it.
//
// Used by TextEmbeddingServable and TensorServable (a generative model's variants, whose
// controller decides by prefill share and per sequence, keep their own:
// core/generation_precision.h).
//
// Thread-safety: Choose(), active(), Pin() and Describe() are safe from any thread; Tick()
// from one thread at a time (the servable's controller thread).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "core/inference_api.h"
#include "core/latency_window.h"
#include "core/precision_controller.h"
#include "core/servable_metrics.h"
#include "engine/model_config.h"

namespace tailcut {

class VariantSelector {
 public:
  // `loaded[i]` says whether config.variants[i] loaded; NotFound naming the model when none
  // did. Starts on the default variant (else the first loaded one) and, unless the policy is
  // off or no fast variant qualifies, with the controller on the accurate variant.
  static Result<std::unique_ptr<VariantSelector>> Create(const ModelConfig& config,
                                                         std::vector<bool> loaded,
                                                         const PrecisionPolicy& policy,
                                                         const ServableMetrics& metrics,
                                                         const Clock& clock);

  // Index of the variant a request runs on: `pin` (a name, or a precision alias: the first
  // loaded variant of that precision), else the active one. InvalidArgument naming the
  // loaded variants when `pin` matches none.
  Result<int> Choose(const std::string& pin) const;
  int active() const { return active_.load(std::memory_order_relaxed); }
  // Pins the active variant (admin) and stops the controller moving it; empty unpins.
  Status Pin(const std::string& name);
  // One controller evaluation; switches the active variant when the controller says so.
  void Tick(const LoadSignals& signals);
  bool has_controller() const { return controller_ != nullptr; }
  bool pinned() const { return pinned_.load(std::memory_order_relaxed); }
  int accurate() const { return accurate_; }  // -1 without a controller.
  int fast() const { return fast_; }          // -1 without a controller.
  // Fills the description's variant and precision fields; `digests[i]` is variant i's file
  // digest ("" when it did not load), `errors[i]` why it did not.
  void Describe(const std::vector<std::string>& digests, const std::vector<std::string>& errors,
                ModelDescription* d) const;

 private:
  VariantSelector(const ModelConfig& config, std::vector<bool> loaded,
                  const PrecisionPolicy& policy, const ServableMetrics& metrics);
  int Find(const std::string& name_or_precision) const;  // -1 if no loaded variant matches.
  void SetActive(int index, const std::string& reason);

  const ModelConfig config_;
  const std::vector<bool> loaded_;
  const PrecisionPolicy policy_;
  const ServableMetrics metrics_;
  std::atomic<int> active_{0};
  std::atomic<bool> pinned_{false};
  std::atomic<int64_t> switches_{0};
  int accurate_ = -1;
  int fast_ = -1;
  std::string note_;      // What the controller moves between, or why it is off.
  std::mutex set_mutex_;  // Serialises switches (controller tick against an admin pin).
  std::unique_ptr<PrecisionController> controller_;
};

// The load signals an ONNX servable feeds its controller each interval: its workers'
// utilisation (`busy_micros` summed over `workers` in `wall_micros`), the latency window's
// P99, rate and count, the machine's memory, and how many times slower the accurate variant
// runs (its measured cost per unit over the fast one's; either 0 = not run yet, ratio 1).
LoadSignals MeasureLoad(const LatencyWindow& latency, int64_t busy_micros, int64_t wall_micros,
                        int workers, int64_t accurate_cost, int64_t fast_cost);

}  // namespace tailcut
