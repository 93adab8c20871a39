// Servable metrics: the series every served model reports, declared once per registry
// (ServableMetricFamilies, owned by the inference service) and instantiated per model with
// label model="<name>", so all models expose the same series.
//
// Thread-safety: the referenced metrics are atomic; ForModel() is safe from any thread.
#pragma once

#include <string>

#include "obs/metrics.h"

namespace tailcut {

// One model's metrics; pointers stay valid for the registry's lifetime.
struct ServableMetrics {
  Histogram* queue_seconds;
  Histogram* batch_seconds;
  Histogram* infer_seconds;
  Histogram* tokenize_seconds;
  Histogram* batch_size;
  Histogram* batch_padded_tokens;
  Histogram* batch_real_tokens;
  Counter* batches;
  Counter* rejected_queue_full;
  Counter* expired;
  // Queued rows dropped unrun because their request ended first (the client went away, or
  // another row of the request failed).
  Counter* dropped_rows;
  Counter* input_tokens;
  // Labelled by model and variant: switches of the active variant ({model, to}) and which
  // variant is active ({model, variant} = 1 or 0).
  std::string model;
  Family<Counter>* precision_switches;
  Family<Gauge>* precision_active;
  // Warm-up actions {model, action}: refreshed_from_l2, recomputed, skipped_busy, loaded.
  Family<Counter>* warmup;
};

class ServableMetricFamilies {
 public:
  explicit ServableMetricFamilies(MetricsRegistry& registry);
  ServableMetrics ForModel(const std::string& model);
  // The per-variant precision families, which generative models report into as well.
  Family<Counter>* precision_switches() { return &precision_switches_; }
  Family<Gauge>* precision_active() { return &precision_active_; }

 private:
  Family<Histogram>& stage_;
  Family<Histogram>& batch_size_;
  Family<Histogram>& batch_padded_tokens_;
  Family<Histogram>& batch_real_tokens_;
  Family<Counter>& batches_;
  Family<Counter>& rejected_;
  Family<Counter>& expired_;
  Family<Counter>& dropped_rows_;
  Family<Counter>& input_tokens_;
  Family<Counter>& precision_switches_;
  Family<Gauge>& precision_active_;
  Family<Counter>& warmup_;
};

}  // namespace tailcut
