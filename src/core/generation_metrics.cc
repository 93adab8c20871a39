#include "core/generation_metrics.h"

namespace tailcut {

GenerationMetricFamilies::GenerationMetricFamilies(MetricsRegistry& r)
    : time_to_first_token_(
          r.AddHistogram("tailcut_generation_time_to_first_token_seconds",
                         "Time from a generation request's arrival to its first generated token",
                         LongLatencyBucketsSeconds(), {"model"})),
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
      cached_prompt_tokens_(r.AddCounter(
          "tailcut_generation_cached_prompt_tokens_total",
          "Prompt tokens of admitted generation requests found in the KV cache (a prefix kept "
          "from an earlier request, or copied from another sequence), not prefilled again",
          {"model"})),
      generated_tokens_(
          r.AddCounter("tailcut_generation_generated_tokens_total", "Tokens generated", {"model"})),
      cancellations_(r.AddCounter("tailcut_generation_cancellations_total",
                                  "Generation requests ended because the client went away",
                                  {"model"})),
      rejected_(r.AddCounter("tailcut_generation_rejected_total",
                             "Generation requests refused for capacity (waiting queue full, "
                             "or waited longer than max_queue_delay_millis)",
                             {"model"})),
      sequence_moves_(r.AddCounter(
          "tailcut_generation_sequence_moves_total",
          "Running sequences moved down to a free sequence id, their KV stream copied, so "
          "that a step's sequence ids stay consecutive (one pass of the model per step)",
          {"model"})),
      prefix_copies_(r.AddCounter(
          "tailcut_generation_prompt_prefix_copies_total",
          "Admitted requests whose prompt prefix (a common system prompt) was copied from "
          "another sequence's KV cache instead of prefilled again",
          {"model"})),
      running_(r.AddGauge("tailcut_generation_running_sequences",
                          "Sequences in the running set (generating or prefilling)", {"model"})),
      waiting_(r.AddGauge("tailcut_generation_waiting_requests",
                          "Generation requests waiting for admission", {"model"})),
      kv_used_(r.AddGauge("tailcut_generation_kv_cells_used",
                          "KV-cache cells holding a token (of a running sequence, or kept "
                          "by a finished one for prefix reuse)",
                          {"model"})),
      kv_reserved_(r.AddGauge("tailcut_generation_kv_cells_reserved",
                              "KV-cache cells promised to running sequences (prompt + "
                              "max_tokens each)",
                              {"model"})),
      kv_capacity_(r.AddGauge("tailcut_generation_kv_cells_capacity",
                              "KV-cache cells (context_tokens; summed over precision "
                              "variants, each has its own cache)",
                              {"model"})),
      variant_requests_(r.AddCounter("tailcut_generation_requests_total",
                                     "Generation requests queued, by the precision variant "
                                     "that generates them and whether the request pinned it "
                                     "(chosen=request) or the server chose it (chosen=server: "
                                     "the precision controller or an administrator's pin)",
                                     {"model", "variant", "chosen"})) {}

GenerationMetrics GenerationMetricFamilies::ForModel(const std::string& model,
                                                     Family<Gauge>* precision_active,
                                                     Family<Counter>* precision_switches) {
  GenerationMetrics m;
  m.model = model;
  m.variant_requests = &variant_requests_;
  m.precision_active = precision_active;
  m.precision_switches = precision_switches;
  m.time_to_first_token_seconds = &time_to_first_token_.WithLabels({model});
  m.inter_token_seconds = &inter_token_.WithLabels({model});
  m.queue_seconds = &queue_.WithLabels({model});
  m.duration_seconds = &duration_.WithLabels({model});
  m.prompt_tokens = &prompt_tokens_.WithLabels({model});
  m.cached_prompt_tokens = &cached_prompt_tokens_.WithLabels({model});
  m.generated_tokens = &generated_tokens_.WithLabels({model});
  m.cancellations = &cancellations_.WithLabels({model});
  m.rejected = &rejected_.WithLabels({model});
  m.sequence_moves = &sequence_moves_.WithLabels({model});
  m.prefix_copies = &prefix_copies_.WithLabels({model});
  m.running_sequences = &running_.WithLabels({model});
  m.waiting_requests = &waiting_.WithLabels({model});
  m.kv_used_cells = &kv_used_.WithLabels({model});
  m.kv_reserved_cells = &kv_reserved_.WithLabels({model});
  m.kv_capacity_cells = &kv_capacity_.WithLabels({model});
  return m;
}

}  // namespace tailcut
