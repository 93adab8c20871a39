#include "core/generative_servable.h"

#include <spdlog/spdlog.h>

#include <chrono>

#include "core/variant_eligibility.h"
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
  model_options.thread_poll_level = g.thread_poll_level;
  if (g.batch_tokens < g.max_sequences) {
    // Each step decodes one token of every running sequence in one Decode() call.
    return Status::InvalidArgument("model '" + config.name + "': batch_tokens (" +
                                   std::to_string(g.batch_tokens) +
                                   ") must be at least max_sequences (" +
                                   std::to_string(g.max_sequences) + ")");
  }
  std::unique_ptr<GenerativeServable> s(new GenerativeServable(config, metrics));
  std::vector<bool> loaded;
  Status default_error;
  for (size_t i = 0; i < config.variants.size(); ++i) {
    const VariantConfig& vc = config.variants[i];
    auto v = std::make_unique<Variant>();
    v->config = vc;
    if (vc.name == config.default_variant) s->default_index_ = static_cast<int>(i);
    auto digest = DigestFile(vc.file_path);
    Result<std::unique_ptr<GenerativeModel>> model =
        digest.ok() ? LoadGenerativeModel(vc.file_path, model_options)
                    : Result<std::unique_ptr<GenerativeModel>>(digest.status());
    if (model.ok()) {
      v->digest = *digest;
      v->model = std::move(model).value();
      spdlog::info(
          "generative model '{}' variant '{}': {}, {} KV cells ({}), {} sequences of up to {} "
          "tokens, trained context {}",
          config.name, vc.name, v->model->description(), v->model->context_tokens(),
          g.kv_cache_layout == KvCacheLayout::kShared ? "shared" : "a stream per sequence",
          v->model->max_sequences(), v->model->sequence_context_tokens(),
          v->model->trained_context_tokens());
    } else {
      v->error = model.status().message();
      if (vc.name == config.default_variant) default_error = model.status();
      spdlog::error("generative model '{}': variant '{}' failed to load: {}", config.name,
                    vc.name, v->error);
    }
    loaded.push_back(v->model != nullptr);
    s->variants_.push_back(std::move(v));
  }
  if (!default_error.ok()) return default_error;

  for (auto& v : s->variants_) {
    if (!v->model) continue;
    if (metrics.variant_requests) {
      v->pinned_requests =
          &metrics.variant_requests->WithLabels({config.name, v->config.name, "request"});
      v->server_requests =
          &metrics.variant_requests->WithLabels({config.name, v->config.name, "server"});
    }
    GenerationSchedulerOptions scheduler;
    scheduler.max_tokens_per_step = g.batch_tokens;
    scheduler.prefill_chunk_tokens = g.prefill_chunk_tokens;
    scheduler.max_step_millis_while_generating = g.max_step_millis_while_generating;
    scheduler.min_prefill_tokens_per_step = g.min_prefill_tokens_per_step;
    scheduler.target_time_to_first_token_millis = g.target_time_to_first_token_millis;
    scheduler.inter_token_slo_millis = g.inter_token_slo_millis;
    scheduler.slow_gaps_per_mille = g.slow_gaps_per_mille;
    scheduler.max_waiting_requests = g.max_waiting_requests;
    scheduler.max_queue_delay_millis = g.max_queue_delay_millis;
    scheduler.default_timeout_millis = options.default_timeout_millis;
    scheduler.metrics = &s->metrics_;
    scheduler.model_name = config.name;
    scheduler.variant_name = v->config.name;
    v->scheduler = std::make_unique<GenerationScheduler>(v->model.get(), scheduler, clock);
  }
  s->precision_ = std::make_unique<GenerationPrecision>(config.variants, loaded,
                                                        s->default_index_, g.precision, clock);
  if (config.variants.size() > 1) {
    spdlog::info("generative model '{}': precision controller {}", config.name,
                 s->precision_->note());
  }
  s->SetActive(s->default_index_, "start");
  if (s->precision_->prefill_index() >= 0 && options.start_controller_thread) {
    GenerativeServable* self = s.get();
    s->controller_thread_ = std::thread([self] { self->ControllerLoop(); });
  }
  return s;
}

GenerativeServable::GenerativeServable(const ModelConfig& config, const GenerationMetrics& metrics)
    : config_(config), metrics_(metrics) {}

GenerativeServable::~GenerativeServable() { Stop(/*drain=*/false); }

int GenerativeServable::Active() const {
  const int pinned = admin_pin_.load();
  return pinned >= 0 ? pinned : precision_->active();
}

std::string GenerativeServable::active_variant() const {
  return variants_[static_cast<size_t>(Active())]->config.name;
}

void GenerativeServable::SetActive(int index, const std::string& reason) {
  const int before = reported_active_.exchange(index);
  if (before == index) return;
  const std::string& to = variants_[static_cast<size_t>(index)]->config.name;
  if (metrics_.precision_active) {
    for (size_t i = 0; i < variants_.size(); ++i) {
      metrics_.precision_active->WithLabels({config_.name, variants_[i]->config.name})
          .Set(static_cast<int>(i) == index ? 1 : 0);
    }
  }
  if (before < 0) return;  // The start, not a switch.
  ++switches_;
  if (metrics_.precision_switches) {
    metrics_.precision_switches->WithLabels({config_.name, to}).Inc();
  }
  spdlog::info("generative model '{}': serving variant '{}' instead of '{}' ({})", config_.name,
               to, variants_[static_cast<size_t>(before)]->config.name, reason);
}

Status GenerativeServable::SetActiveVariant(const std::string& name) {
  if (name.empty()) {
    admin_pin_ = -1;
    SetActive(precision_->active(), "administrator pin removed");
    return Status::Ok();
  }
  auto index = precision_->Choose(name);
  if (!index.ok()) {
    return Status::InvalidArgument("model '" + config_.name + "': " + index.status().message());
  }
  admin_pin_ = *index;
  SetActive(*index, "pinned by an administrator");
  return Status::Ok();
}

void GenerativeServable::ControllerTick() {
  std::vector<VariantTokens> totals;
  for (const auto& v : variants_) {
    VariantTokens t;
    if (v->scheduler) {
      const GenerationSchedulerStats st = v->scheduler->stats();
      t.prompt_tokens = st.prompt_tokens_decoded;
      t.generated_tokens = st.generated_tokens_decoded;
    }
    totals.push_back(t);
  }
  if (precision_->Tick(totals) && admin_pin_.load() < 0) {
    SetActive(precision_->active(), precision_->last_reason());
  }
}

void GenerativeServable::ControllerLoop() {
  const auto interval = std::chrono::microseconds(precision_->interval_micros());
  std::unique_lock<std::mutex> lock(controller_mu_);
  while (!controller_wake_.wait_for(lock, interval, [&] { return controller_stop_; })) {
    lock.unlock();
    ControllerTick();
    lock.lock();
  }
}

void GenerativeServable::Generate(GenerateRequest request, GenerationSinkPtr sink,
                                  InFlightGate::Pass pass) {
  if (!pass) {
    sink->OnEnd(Status::Unavailable("model '" + config_.name + "' is shutting down"));
    return;
  }
  const bool pinned = !request.precision.empty();
  Result<int> index = pinned ? precision_->Choose(request.precision) : Result<int>(Active());
  if (!index.ok()) {
    sink->OnEnd(
        Status::InvalidArgument("model '" + config_.name + "': " + index.status().message()));
    return;
  }
  Variant& v = *variants_[static_cast<size_t>(*index)];
  if (Counter* requests = pinned ? v.pinned_requests : v.server_requests) requests->Inc();
  v.scheduler->Generate(std::move(request), std::move(sink));
}

void GenerativeServable::Stop(bool drain) {
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  gate_.Close();
  gate_.WaitIdle();
  {
    std::lock_guard<std::mutex> lock(controller_mu_);
    controller_stop_ = true;
  }
  controller_wake_.notify_all();
  if (controller_thread_.joinable()) controller_thread_.join();
  // Each step loop stops (and, with drain, finishes its sequences) on its own thread; stop
  // them all before waiting on any, so a drain takes the longest one's time, not the sum.
  std::vector<std::thread> stoppers;
  for (auto& v : variants_) {
    if (!v->scheduler) continue;
    GenerationScheduler* scheduler = v->scheduler.get();
    stoppers.emplace_back([scheduler, drain] { scheduler->Stop(drain); });
  }
  for (auto& t : stoppers) t.join();
}

int64_t GenerativeServable::queued_rows() const {
  int64_t waiting = 0;
  for (const auto& v : variants_) {
    if (v->scheduler) waiting += v->scheduler->stats().waiting;
  }
  return waiting;
}

GenerationSchedulerStats GenerativeServable::stats() const {
  return variants_[static_cast<size_t>(default_index_)]->scheduler->stats();
}

ModelDescription GenerativeServable::Describe() const {
  const Variant& def = *variants_[static_cast<size_t>(default_index_)];
  const GenerativeModel& model = *def.model;
  ModelDescription d;
  d.name = config_.name;
  d.kind = std::string(ModelKindName(config_.kind));
  d.state = ModelState::kReady;
  const Variant& active = *variants_[static_cast<size_t>(Active())];
  d.version = active.digest;
  d.context_tokens = model.context_tokens();
  d.max_sequences = model.max_sequences();
  d.trained_context_tokens = model.trained_context_tokens();
  d.engine_description = active.model->description();
  // The longest sequence (prompt and generated tokens) and the most generated at once, for
  // front-ends that read the embedding fields.
  d.max_sequence_length = model.sequence_context_tokens();
  d.max_batch_size = model.max_sequences();
  for (size_t i = 0; i < variants_.size(); ++i) {
    const Variant& v = *variants_[i];
    if (v.model) d.variants.push_back(v.config.name);
    VariantDescription vd = DescribeVariant(v.config, v.model != nullptr, v.error, v.digest,
                                            precision_->Eligible(static_cast<int>(i)));
    d.variant_details.push_back(std::move(vd));
  }
  d.active_variant = active.config.name;
  d.default_variant = config_.default_variant;
  d.precision_policy = admin_pin_.load() >= 0 ? "pinned" : precision_->policy_name();
  d.precision_controller = precision_->note();
  d.precision_switches = switches_.load();
  return d;
}

}  // namespace tailcut
