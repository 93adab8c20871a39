#include "core/text_embedding_servable.h"

#include <algorithm>

#include "core/embed_job.h"

namespace tailcut {

TextEmbeddingServable::TextEmbeddingServable(const ModelConfig& config,
                                             const TextServableOptions& options,
                                             const ServableMetrics& metrics, const Clock& clock)
    : config_(config), options_(options), metrics_(metrics), clock_(clock) {}

TextEmbeddingServable::~TextEmbeddingServable() {
  Stop(/*drain=*/false);
}

Result<std::unique_ptr<TextEmbeddingServable>> TextEmbeddingServable::Load(
    const ModelConfig& config, const OnnxSessionOptions& session,
    const TextServableOptions& options, const ServableMetrics& metrics, const Clock& clock) {
  std::unique_ptr<TextEmbeddingServable> s(
      new TextEmbeddingServable(config, options, metrics, clock));
  auto model = TextEmbeddingModel::Load(config, session);
  if (!model.ok()) return model.status();
  s->variants_.push_back({"fp32", std::move(model).value()});

  BatchSchedulerOptions scheduler = options.scheduler;
  if (config.max_batch_size > 0) {
    scheduler.queue.max_batch_size =
        std::min<int64_t>(scheduler.queue.max_batch_size, config.max_batch_size);
  }
  TextEmbeddingServable* self = s.get();
  s->scheduler_ = std::make_unique<BatchScheduler>(
      scheduler, [self](Batch&& batch) { self->ProcessBatch(std::move(batch)); }, clock);
  return s;
}

void TextEmbeddingServable::Stop(bool drain) {
  if (scheduler_) scheduler_->Stop(drain);
}

Result<int> TextEmbeddingServable::ChooseVariant(const std::string& precision) const {
  if (precision.empty()) return active_variant_;
  for (size_t i = 0; i < variants_.size(); ++i) {
    if (variants_[i].name == precision) return static_cast<int>(i);
  }
  std::string names;
  for (const auto& v : variants_) names += (names.empty() ? "" : ", ") + v.name;
  return Status::InvalidArgument("model '" + config_.name + "' has no precision variant '" +
                                 precision + "'; available: " + names);
}

void TextEmbeddingServable::Embed(EmbedRequest request, EmbedCallback done) {
  const size_t n = request.inputs.size();
  if (n == 0) {
    return done(Status::InvalidArgument("'input' must contain at least one text"));
  }
  if (n > options_.max_inputs_per_request) {
    return done(Status::PayloadTooLarge("request has " + std::to_string(n) +
                                        " inputs; the limit is " +
                                        std::to_string(options_.max_inputs_per_request)));
  }
  auto variant = ChooseVariant(request.precision);
  if (!variant.ok()) return done(variant.status());
  const TextEmbeddingModel& model = *variants_[*variant].model;

  // Tokenise on the caller's (IO) thread: it is microseconds per text, and the batcher
  // needs the lengths to group inputs.
  const int64_t tokenize_start = clock_.NowMicros();
  EncodeOptions encode;
  encode.truncate = request.truncate;
  std::vector<std::vector<int64_t>> ids(n);
  EmbedResult result;
  result.model = config_.name;
  result.variant = variants_[*variant].name;
  result.dimensions = model.dimensions();
  result.token_counts.resize(n);
  for (size_t i = 0; i < n; ++i) {
    auto enc = model.tokenizer().Encode(request.inputs[i], encode);
    if (!enc.ok()) {
      return done(Status(enc.status().code(),
                         "input " + std::to_string(i) + ": " + enc.status().message()));
    }
    ids[i] = std::move(enc->ids);
    result.token_counts[i] = static_cast<int32_t>(ids[i].size());
  }
  const int64_t now = clock_.NowMicros();
  result.timings = request.timings;
  result.timings.tokenize_micros = now - tokenize_start;
  metrics_.tokenize_seconds->Observe(result.timings.tokenize_micros / 1e6);
  result.embeddings.resize(n * static_cast<size_t>(model.dimensions()));

  const bool normalize = request.normalize.value_or(config_.normalize);
  // Requests whose deadline passes in the queue are failed by the scheduler, which does not
  // know the model's metrics: count them here, once per request.
  EmbedCallback counted = [done = std::move(done),
                           expired = metrics_.expired](Result<EmbedResult> r) {
    if (!r.ok() && r.status().code() == Status::Code::kDeadlineExceeded) expired->Inc();
    done(std::move(r));
  };
  auto job = std::make_shared<EmbedJob>(std::move(result), n, normalize, std::move(counted));
  int64_t deadline = request.deadline_micros;
  if (deadline == 0 && options_.default_timeout_micros > 0) {
    deadline =
        (request.received_micros ? request.received_micros : now) + options_.default_timeout_micros;
  }
  std::vector<std::unique_ptr<BatchTask>> tasks;
  tasks.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    tasks.push_back(
        std::make_unique<EmbedItemTask>(job, i, std::move(ids[i]), *variant, now, deadline));
  }
  Status queued = scheduler_->Schedule(tasks);
  if (!queued.ok()) {
    if (queued.code() == Status::Code::kResourceExhausted) metrics_.rejected_queue_full->Inc();
    job->Fail(queued);
  }
}

void TextEmbeddingServable::ProcessBatch(Batch&& batch) {
  const int64_t start = clock_.NowMicros();
  auto& first = static_cast<EmbedItemTask&>(*batch.tasks.front());
  const TextEmbeddingModel& model = *variants_[first.variant()].model;
  const size_t dim = static_cast<size_t>(model.dimensions());

  thread_local std::vector<std::span<const int64_t>> spans;
  thread_local std::vector<float> out;
  spans.clear();
  int64_t real_tokens = 0;
  for (const auto& t : batch.tasks) {
    const auto& item = static_cast<const EmbedItemTask&>(*t);
    spans.emplace_back(item.ids());
    real_tokens += static_cast<int64_t>(item.ids().size());
  }
  out.resize(spans.size() * dim);

  const int64_t infer_start = clock_.NowMicros();
  Status s = model.EmbedBatch(spans, out.data());
  const int64_t infer_end = clock_.NowMicros();

  metrics_.batches->Inc();
  metrics_.batch_size->Observe(static_cast<double>(batch.rows));
  metrics_.batch_padded_tokens->Observe(static_cast<double>(batch.padded_tokens()));
  metrics_.batch_real_tokens->Observe(static_cast<double>(real_tokens));
  metrics_.input_tokens->Inc(static_cast<double>(real_tokens));
  metrics_.infer_seconds->Observe((infer_end - infer_start) / 1e6);
  metrics_.batch_seconds->Observe((infer_start - start) / 1e6);

  for (size_t i = 0; i < batch.tasks.size(); ++i) {
    auto& item = static_cast<EmbedItemTask&>(*batch.tasks[i]);
    if (!s.ok()) {
      item.Fail(s);
      continue;
    }
    const int64_t queued = batch.formed_at_micros - item.enqueue_time_micros();
    metrics_.queue_seconds->Observe(queued / 1e6);
    item.job().CompleteItem(item.index(), std::span<const float>(out.data() + i * dim, dim), queued,
                            infer_start - batch.formed_at_micros, infer_end - infer_start);
  }
}

ModelDescription TextEmbeddingServable::Describe() const {
  const TextEmbeddingModel& model = *variants_[active_variant_].model;
  ModelDescription d;
  d.name = config_.name;
  d.kind = std::string(ModelKindName(config_.kind));
  d.state = ModelState::kReady;
  d.version = model.session().file_digest();
  d.dimensions = model.dimensions();
  d.max_sequence_length = config_.max_sequence_length;
  d.max_batch_size = static_cast<int>(scheduler_->options().queue.max_batch_size);
  d.inputs = model.session().inputs();
  d.outputs = model.session().outputs();
  for (const auto& v : variants_) d.variants.push_back(v.name);
  d.active_variant = variants_[active_variant_].name;
  return d;
}

}  // namespace tailcut
