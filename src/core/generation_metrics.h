// Generation metrics: the series every generative model reports, declared once per registry
// (GenerationMetricFamilies, owned by the inference service) and instantiated per model with
// label model="<name>", in the style of servable_metrics.h. The latencies a streaming client
// feels are time to first token (arrival to the first generated token) and inter-token time
// (between two tokens of one sequence: the step time every running stream pays). The queue
// wait and the end-to-end duration grow with the streams' lengths, so their buckets go on to
// 120 s (LongLatencyBucketsSeconds()); the per-token ones stop at 10 s.
//
// Thread-safety: the referenced metrics are atomic; ForModel() is safe from any thread.
#pragma once

#include <string>

#include "obs/metrics.h"

namespace tailcut {

// One model's generation metrics; pointers stay valid for the registry's lifetime.
struct GenerationMetrics {
  Histogram* time_to_first_token_seconds;  // Arrival to the first token.
  Histogram* inter_token_seconds;          // Between consecutive tokens of one sequence.
  Histogram* queue_seconds;                // Arrival to admission into the running set.
  Histogram* duration_seconds;             // Arrival to the end, for every admitted request.
  Counter* prompt_tokens;
  Counter* cached_prompt_tokens;  // Prompt tokens a sequence's kept KV cache supplied.
  Counter* generated_tokens;
  Counter* cancellations;  // Ended because the client went away.
  Counter* rejected;       // Refused with kResourceExhausted (queue full or waited too long).
  Counter* sequence_moves;  // Running sequences moved to a lower id (KV stream copied).
  Counter* prefix_copies;   // Prompt prefixes copied from another sequence's KV cache.
  Gauge* running_sequences;
  Gauge* waiting_requests;
  Gauge* kv_used_cells;      // Includes the tokens finished sequences keep for reuse.
  Gauge* kv_reserved_cells;  // Promised to running sequences (prompt + max_tokens each).
  Gauge* kv_capacity_cells;
  // Per precision variant: requests queued {model, variant, chosen} (chosen: "request" when
  // the request pinned it, "server" when the controller or an administrator's pin did), and
  // the series the embedding models share (servable_metrics.h): tailcut_precision_active
  // {model, variant} and tailcut_precision_switches_total {model, to}. Null families record
  // nothing (tests).
  std::string model;
  Family<Counter>* variant_requests = nullptr;
  Family<Gauge>* precision_active = nullptr;
  Family<Counter>* precision_switches = nullptr;
};

class GenerationMetricFamilies {
 public:
  explicit GenerationMetricFamilies(MetricsRegistry& registry);
  // `precision_active` / `precision_switches`: the embedding models' families of those
  // names (ServableMetricFamilies), which generative models report into too; may be null.
  GenerationMetrics ForModel(const std::string& model, Family<Gauge>* precision_active = nullptr,
                             Family<Counter>* precision_switches = nullptr);

 private:
  Family<Histogram>& time_to_first_token_;
  Family<Histogram>& inter_token_;
  Family<Histogram>& queue_;
  Family<Histogram>& duration_;
  Family<Counter>& prompt_tokens_;
  Family<Counter>& cached_prompt_tokens_;
  Family<Counter>& generated_tokens_;
  Family<Counter>& cancellations_;
  Family<Counter>& rejected_;
  Family<Counter>& sequence_moves_;
  Family<Counter>& prefix_copies_;
  Family<Gauge>& running_;
  Family<Gauge>& waiting_;
  Family<Gauge>& kv_used_;
  Family<Gauge>& kv_reserved_;
  Family<Gauge>& kv_capacity_;
  Family<Counter>& variant_requests_;
};

}  // namespace tailcut
