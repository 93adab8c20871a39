#include "core/servable_metrics.h"

namespace tailcut {

ServableMetricFamilies::ServableMetricFamilies(MetricsRegistry& r)
    : stage_(r.AddHistogram("tailcut_stage_duration_seconds",
                            "Time requests spend per model stage (tokenize, queue, batch, infer); "
                            "parse, serialize and total are per route in "
                            "tailcut_request_stage_duration_seconds",
                            LatencyBucketsSeconds(), {"model", "stage"})),
      batch_size_(r.AddHistogram("tailcut_batch_size", "Rows (inputs) per executed batch",
                                 PowersOfTwoBuckets(1024), {"model"})),
      batch_padded_tokens_(
          r.AddHistogram("tailcut_batch_padded_tokens",
                         "Tokens per executed batch including padding (rows x longest)",
                         PowersOfTwoBuckets(65536), {"model"})),
      batch_real_tokens_(r.AddHistogram("tailcut_batch_tokens",
                                        "Tokens per executed batch without padding",
                                        PowersOfTwoBuckets(65536), {"model"})),
      batches_(r.AddCounter("tailcut_batches_total", "Batches executed", {"model"})),
      rejected_(r.AddCounter("tailcut_queue_rejected_total",
                             "Requests refused because the model's queue was full", {"model"})),
      expired_(r.AddCounter("tailcut_deadline_exceeded_total",
                            "Requests dropped because their deadline passed", {"model"})),
      dropped_rows_(r.AddCounter("tailcut_dropped_rows_total",
                                 "Queued rows not run because their request had ended (client "
                                 "disconnected, or another of its rows failed)",
                                 {"model"})),
      input_tokens_(
          r.AddCounter("tailcut_input_tokens_total", "Tokens of all embedded inputs", {"model"})),
      precision_switches_(r.AddCounter("tailcut_precision_switches_total",
                                       "Switches of the variant serving unpinned requests, by the "
                                       "variant switched to",
                                       {"model", "to"})),
      precision_active_(r.AddGauge("tailcut_precision_active",
                                   "1 for the variant serving unpinned requests, else 0",
                                   {"model", "variant"})),
      warmup_(r.AddCounter("tailcut_warmup_total",
                           "Predictive warm-up actions: refreshed_from_l2, recomputed, "
                           "skipped_busy (queue not empty), loaded (at start-up from Redis), "
                           "reference_backfill (accurate rows for inputs the fast variant "
                           "answered)",
                           {"model", "action"})) {}

ServableMetrics ServableMetricFamilies::ForModel(const std::string& model) {
  ServableMetrics m;
  m.queue_seconds = &stage_.WithLabels({model, "queue"});
  m.batch_seconds = &stage_.WithLabels({model, "batch"});
  m.infer_seconds = &stage_.WithLabels({model, "infer"});
  m.tokenize_seconds = &stage_.WithLabels({model, "tokenize"});
  m.batch_size = &batch_size_.WithLabels({model});
  m.batch_padded_tokens = &batch_padded_tokens_.WithLabels({model});
  m.batch_real_tokens = &batch_real_tokens_.WithLabels({model});
  m.batches = &batches_.WithLabels({model});
  m.rejected_queue_full = &rejected_.WithLabels({model});
  m.expired = &expired_.WithLabels({model});
  m.dropped_rows = &dropped_rows_.WithLabels({model});
  m.input_tokens = &input_tokens_.WithLabels({model});
  m.model = model;
  m.precision_switches = &precision_switches_;
  m.precision_active = &precision_active_;
  m.warmup = &warmup_;
  return m;
}

}  // namespace tailcut
