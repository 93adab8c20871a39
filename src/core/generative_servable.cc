#include "core/generative_servable.h"

#include <spdlog/spdlog.h>

#include "engine/onnx_session.h"  // DigestFile

namespace tailcut {

Result<std::unique_ptr<GenerativeServable>> GenerativeServable::Load(
    const ModelConfig& config, const GenerativeServableOptions& options,
    const GenerationMetrics& metrics, const Clock& clock) {
  const GenerativeConfig& g = config.generation;
  GenerativeModelOptions model_options;
  model_options.context_tokens = g.context_tokens;
  model_options.max_sequences = g.max_sequences;
  model_options.kv_cache_layout = g.kv_cache_layout;
  model_options.batch_tokens = g.batch_tokens;
  model_options.decode_threads = g.decode_threads;
  model_options.batch_threads = g.batch_threads;
  if (g.batch_tokens < g.max_sequences) {
    // Each step decodes one token of every running sequence in one Decode() call.
    return Status::InvalidArgument("model '" + config.name + "': batch_tokens (" +
                                   std::to_string(g.batch_tokens) +
                                   ") must be at least max_sequences (" +
                                   std::to_string(g.max_sequences) + ")");
  }
  auto digest = DigestFile(config.file_path);
  if (!digest.ok()) return digest.status();
  auto model = LoadGenerativeModel(config.file_path, model_options);
  if (!model.ok()) return model.status();
  spdlog::info(
      "generative model '{}': {}, {} KV cells ({}), {} sequences of up to {} tokens, trained "
      "context {}",
      config.name, (*model)->description(), (*model)->context_tokens(),
      g.kv_cache_layout == KvCacheLayout::kShared ? "shared" : "a stream per sequence",
      (*model)->max_sequences(), (*model)->sequence_context_tokens(),
      (*model)->trained_context_tokens());

  std::unique_ptr<GenerativeServable> s(
      new GenerativeServable(config, *digest, std::move(model).value(), metrics));
  GenerationSchedulerOptions scheduler;
  scheduler.max_tokens_per_step = g.batch_tokens;
  scheduler.prefill_chunk_tokens = g.prefill_chunk_tokens;
  scheduler.max_step_millis_while_generating = g.max_step_millis_while_generating;
  scheduler.min_prefill_tokens_per_step = g.min_prefill_tokens_per_step;
  scheduler.max_waiting_requests = g.max_waiting_requests;
  scheduler.max_queue_delay_millis = g.max_queue_delay_millis;
  scheduler.default_timeout_millis = options.default_timeout_millis;
  scheduler.metrics = &s->metrics_;
  scheduler.model_name = config.name;
  scheduler.variant_name = config.default_variant;
  s->scheduler_ = std::make_unique<GenerationScheduler>(s->model_.get(), scheduler, clock);
  return s;
}

GenerativeServable::GenerativeServable(const ModelConfig& config, std::string digest,
                                       std::unique_ptr<GenerativeModel> model,
                                       const GenerationMetrics& metrics)
    : config_(config), digest_(std::move(digest)), metrics_(metrics), model_(std::move(model)) {}

GenerativeServable::~GenerativeServable() { Stop(/*drain=*/false); }

void GenerativeServable::Generate(GenerateRequest request, GenerationSinkPtr sink,
                                  InFlightGate::Pass pass) {
  if (!pass) {
    sink->OnEnd(Status::Unavailable("model '" + config_.name + "' is shutting down"));
    return;
  }
  scheduler_->Generate(std::move(request), std::move(sink));
}

void GenerativeServable::Stop(bool drain) {
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  gate_.Close();
  gate_.WaitIdle();
  if (scheduler_) scheduler_->Stop(drain);
}

ModelDescription GenerativeServable::Describe() const {
  ModelDescription d;
  d.name = config_.name;
  d.kind = std::string(ModelKindName(config_.kind));
  d.state = ModelState::kReady;
  d.version = digest_;
  d.context_tokens = model_->context_tokens();
  d.max_sequences = model_->max_sequences();
  d.trained_context_tokens = model_->trained_context_tokens();
  d.engine_description = model_->description();
  // The longest sequence (prompt and generated tokens) and the most generated at once, for
  // front-ends that read the embedding fields.
  d.max_sequence_length = model_->sequence_context_tokens();
  d.max_batch_size = model_->max_sequences();
  const std::string& variant = config_.default_variant;
  d.variants = {variant};
  d.active_variant = variant;
  d.default_variant = variant;
  VariantDescription v;
  v.name = variant;
  v.loaded = true;
  v.file_digest = digest_;
  d.variant_details = {v};
  d.precision_policy = "off";
  d.precision_controller = "off: a generative model has one variant";
  return d;
}

}  // namespace tailcut
