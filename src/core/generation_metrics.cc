#include "core/generation_metrics.h"

namespace tailcut {

GenerationMetricFamilies::GenerationMetricFamilies(MetricsRegistry& r)
    : time_to_first_token_(r.AddHistogram(
          "tailcut_generation_time_to_first_token_seconds",
          "Time from a generation request's arrival to its first generated token",
          LatencyBucketsSeconds(), {"model"})),
      inter_token_(r.AddHistogram("tailcut_generation_inter_token_seconds",
                                  "Time between two consecutive tokens of one sequence",
                                  LatencyBucketsSeconds(), {"model"})),
      queue_(r.AddHistogram("tailcut_generation_queue_seconds",
                            "Time a generation request waited for admission (KV space, a "
                            "free sequence)",
                            LongLatencyBucketsSeconds(), {"model"})),
      duration_(r.AddHistogram("tailcut_generation_duration_seconds",
                               "Time from a generation request's arrival to its end",
                               LongLatencyBucketsSeconds(), {"model"})),
      prompt_tokens_(r.AddCounter("tailcut_generation_prompt_tokens_total",
                                  "Prompt tokens of admitted generation requests", {"model"})),
      generated_tokens_(r.AddCounter("tailcut_generation_generated_tokens_total",
                                     "Tokens generated", {"model"})),
      cancellations_(r.AddCounter("tailcut_generation_cancellations_total",
                                  "Generation requests ended because the client went away",
                                  {"model"})),
      rejected_(r.AddCounter("tailcut_generation_rejected_total",
                             "Generation requests refused for capacity (waiting queue full, "
                             "or waited longer than max_queue_delay_millis)",
                             {"model"})),
      running_(r.AddGauge("tailcut_generation_running_sequences",
                          "Sequences in the running set (generating or prefilling)", {"model"})),
      waiting_(r.AddGauge("tailcut_generation_waiting_requests",
                          "Generation requests waiting for admission", {"model"})),
      kv_used_(r.AddGauge("tailcut_generation_kv_cells_used",
                          "KV-cache cells holding a token", {"model"})),
      kv_capacity_(r.AddGauge("tailcut_generation_kv_cells_capacity",
                              "KV-cache cells (context_tokens)", {"model"})) {}

GenerationMetrics GenerationMetricFamilies::ForModel(const std::string& model) {
  GenerationMetrics m;
  m.time_to_first_token_seconds = &time_to_first_token_.WithLabels({model});
  m.inter_token_seconds = &inter_token_.WithLabels({model});
  m.queue_seconds = &queue_.WithLabels({model});
  m.duration_seconds = &duration_.WithLabels({model});
  m.prompt_tokens = &prompt_tokens_.WithLabels({model});
  m.generated_tokens = &generated_tokens_.WithLabels({model});
  m.cancellations = &cancellations_.WithLabels({model});
  m.rejected = &rejected_.WithLabels({model});
  m.running_sequences = &running_.WithLabels({model});
  m.waiting_requests = &waiting_.WithLabels({model});
  m.kv_used_cells = &kv_used_.WithLabels({model});
  m.kv_capacity_cells = &kv_capacity_.WithLabels({model});
  return m;
}

}  // namespace tailcut
