#include "core/tensor_servable.h"

#include <spdlog/spdlog.h>
#include <xxhash.h>

#include <algorithm>
#include <cstring>

#include "core/classification.h"

namespace tailcut {
namespace {

class TensorTask final : public BatchTask {
 public:
  TensorTask(TensorRequest request, TensorCallback done, int variant, int64_t rows, uint64_t key,
             int64_t enqueued, int64_t deadline)
      : request_(std::move(request)),
        done_(std::move(done)),
        variant_(variant),
        rows_(rows),
        key_(key),
        enqueued_(enqueued),
        deadline_(deadline) {}

  int64_t rows() const override { return rows_; }
  int64_t length() const override { return 1; }
  uint64_t batch_key() const override { return key_; }
  int64_t enqueue_time_micros() const override { return enqueued_; }
  int64_t deadline_micros() const override { return deadline_; }
  // The client went away while the request was queued.
  bool abandoned() const override { return IsCancelled(request_.cancellation); }
  void Fail(const Status& status) override { done_(status); }

  TensorRequest& request() { return request_; }
  int variant() const { return variant_; }
  void Succeed(TensorResult result) { done_(std::move(result)); }

 private:
  TensorRequest request_;
  TensorCallback done_;
  int variant_;  // Index into the servable's variants; part of the batch key.
  int64_t rows_;
  uint64_t key_;
  int64_t enqueued_;
  int64_t deadline_;
};

// Hash of everything but the batch dimension: the variant, names, datatypes and the other
// dimensions, plus the requested outputs. Requests with equal keys can be concatenated.
uint64_t BatchKey(const TensorRequest& r, int variant) {
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  XXH3_64bits_update(state, &variant, sizeof(variant));
  for (const auto& t : r.inputs) {
    XXH3_64bits_update(state, t.name.data(), t.name.size() + 1);
    const int type = static_cast<int>(t.type);
    XXH3_64bits_update(state, &type, sizeof(type));
    XXH3_64bits_update(state, t.shape.data() + 1, (t.shape.size() - 1) * sizeof(int64_t));
  }
  for (const auto& o : r.outputs) XXH3_64bits_update(state, o.data(), o.size() + 1);
  const uint64_t key = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return key;
}

// Whether every output has the batch's rows on its first axis, so that it can be split back
// among the requests of the batch by position.
bool SplitsByRow(const std::vector<Tensor>& outputs, int64_t rows) {
  for (const Tensor& out : outputs) {
    if (out.shape.empty() || out.shape[0] != rows) return false;
  }
  return true;
}

}  // namespace

TensorServable::TensorServable(const ModelConfig& config, const ServableMetrics& metrics,
                               const Clock& clock, const TensorServableOptions& options)
    : config_(config),
      metrics_(metrics),
      clock_(clock),
      options_(options),
      latency_(options.precision_window_seconds, clock) {}

TensorServable::~TensorServable() {
  Stop(/*drain=*/false);
}

Result<std::unique_ptr<TensorServable>> TensorServable::Load(const ModelConfig& config,
                                                             const OnnxSessionOptions& session,
                                                             const TensorServableOptions& options,
                                                             const ServableMetrics& metrics,
                                                             const Clock& clock) {
  std::unique_ptr<TensorServable> s(new TensorServable(config, metrics, clock, options));
  // Every listed variant, each its own session; one that fails is reported and the others
  // serve (as for text models).
  Status first_error = Status::Ok();
  std::vector<bool> loaded;
  for (const VariantConfig& vc : config.variants) {
    auto v = std::make_unique<Variant>();
    auto opened = OnnxSession::Load(vc.file_path, session);
    if (opened.ok()) {
      v->session = std::move(opened).value();
    } else {
      v->error = opened.status().message();
      if (first_error.ok()) first_error = opened.status();
      spdlog::error("model '{}': variant '{}' failed to load: {}", config.name, vc.name, v->error);
    }
    loaded.push_back(v->session != nullptr);
    s->variants_.push_back(std::move(v));
  }
  auto selector = VariantSelector::Create(config, loaded, options.precision, metrics, clock);
  if (!selector.ok()) return first_error.ok() ? selector.status() : first_error;
  s->selector_ = std::move(selector).value();
  s->session_ = s->variants_[static_cast<size_t>(s->selector_->active())]->session.get();
  for (size_t i = 0; i < s->variants_.size(); ++i) {
    const OnnxSession* other = s->variants_[i]->session.get();
    if (other == nullptr || other == s->session_) continue;
    if (other->inputs().size() != s->session_->inputs().size() ||
        other->outputs().size() != s->session_->outputs().size()) {
      return Status::InvalidArgument(
          "model '" + config.name + "': variant '" + config.variants[i].name +
          "' has other inputs or outputs than '" +
          config.variants[static_cast<size_t>(s->selector_->active())].name +
          "'; every variant must take and give the same tensors");
    }
  }

  bool batchable = true;
  for (const auto* specs : {&s->session_->inputs(), &s->session_->outputs()}) {
    for (const auto& spec : *specs) {
      if (spec.shape.empty() || spec.shape[0] >= 0) batchable = false;
    }
  }
  s->batchable_ = batchable;
  if (config.image) {
    auto image = ImageInput::Create(*config.image, s->session_->inputs(), config.name);
    if (!image.ok()) return image.status();
    s->image_input_ = std::move(image).value();
  }
  if (!config.labels_path.empty()) {
    auto labels = ReadLabels(config.labels_path);
    if (!labels.ok()) return labels.status();
    s->labels_ = std::move(labels).value();
  }
  BatchSchedulerOptions scheduler = options.scheduler;
  if (!batchable) {
    scheduler.queue.max_batch_size = 1;
  } else if (config.max_batch_size > 0) {
    scheduler.queue.max_batch_size =
        std::min<int64_t>(scheduler.queue.max_batch_size, config.max_batch_size);
  }
  scheduler.queue.max_batch_tokens = 0;  // Rows are the cost unit for tensors.
  scheduler.dropped_rows = s->metrics_.dropped_rows;
  TensorServable* self = s.get();
  s->scheduler_ = std::make_unique<BatchScheduler>(
      scheduler, [self](Batch&& batch) { self->ProcessBatch(std::move(batch)); }, clock);
  if (s->selector_->has_controller()) {
    s->controller_thread_ = std::thread([self] { self->ControllerLoop(); });
  }
  return s;
}

void TensorServable::StopController() {
  {
    std::lock_guard<std::mutex> lock(controller_mutex_);
    controller_stop_ = true;
  }
  controller_wake_.notify_all();
  if (controller_thread_.joinable()) controller_thread_.join();
}

void TensorServable::Stop(bool drain) {
  StopController();
  if (scheduler_) scheduler_->Stop(drain);
}

Status TensorServable::SetActiveVariant(const std::string& name) {
  return selector_->Pin(name);
}

void TensorServable::ControllerLoop() {
  int64_t last_busy = busy_micros_.load();
  int64_t last_tick = clock_.NowMicros();
  const int workers = scheduler_->options().num_workers;
  std::unique_lock<std::mutex> lock(controller_mutex_);
  while (!controller_wake_.wait_for(lock,
                                    std::chrono::microseconds(options_.precision_interval_micros),
                                    [this] { return controller_stop_; })) {
    const int64_t now = clock_.NowMicros();
    const int64_t busy = busy_micros_.load();
    const LoadSignals s =
        MeasureLoad(latency_, busy - last_busy, now - last_tick, workers,
                    variants_[static_cast<size_t>(selector_->accurate())]->nanos_per_row.load(),
                    variants_[static_cast<size_t>(selector_->fast())]->nanos_per_row.load());
    last_busy = busy;
    last_tick = now;
    selector_->Tick(s);
  }
}

void TensorServable::Infer(TensorRequest request, TensorCallback done) {
  auto variant = selector_->Choose(request.precision);
  if (!variant.ok()) return done(variant.status());
  if (image_input_) {
    for (Tensor& t : request.inputs) {
      if (t.type != DataType::kBytes || t.name != image_input_->input_name()) continue;
      const int64_t start = clock_.NowMicros();
      Status converted = image_input_->Convert(&t);
      request.timings.preprocess_micros += clock_.NowMicros() - start;
      if (!converted.ok()) return done(converted);
    }
  }
  Status valid = session_->ValidateInputs(request.inputs);
  if (!valid.ok()) return done(valid);
  for (const auto& name : request.outputs) {
    if (!session_->FindOutput(name)) {
      return done(
          Status::InvalidArgument("model '" + config_.name + "' has no output '" + name + "'"));
    }
  }
  for (const OutputClassification& c : request.classifications) {
    const TensorSpec* spec = session_->FindOutput(c.output);
    if (spec == nullptr) {
      return done(Status::InvalidArgument("model '" + config_.name + "' has no output '" +
                                          c.output + "' to classify"));
    }
    if (c.top_k < 1) {
      return done(Status::InvalidArgument("output '" + c.output +
                                          "': classification must be a positive number of "
                                          "classes, got " +
                                          std::to_string(c.top_k)));
    }
    if (!request.outputs.empty() && std::find(request.outputs.begin(), request.outputs.end(),
                                              c.output) == request.outputs.end()) {
      return done(Status::InvalidArgument("output '" + c.output +
                                          "' is classified but not among the requested outputs"));
    }
  }
  int64_t rows = 1;
  uint64_t key = 0;
  if (batchable_) {
    rows = request.inputs.front().shape[0];
    for (const auto& t : request.inputs) {
      if (t.shape[0] != rows) {
        return done(Status::InvalidArgument(
            "inputs disagree on the batch dimension (first axis): " + ShapeToString(t.shape) +
            " vs " + std::to_string(rows) + " rows"));
      }
    }
    if (rows == 0) return done(Status::InvalidArgument("the batch dimension is 0"));
    key = BatchKey(request, *variant);
  }
  const int64_t now = clock_.NowMicros();
  int64_t deadline = request.deadline_micros;
  if (deadline == 0 && options_.default_timeout_micros > 0) {
    deadline =
        (request.received_micros ? request.received_micros : now) + options_.default_timeout_micros;
  }
  // As for text: the scheduler fails expired tasks without knowing the model's metrics. An
  // answered request's latency feeds the precision controller's window.
  const int64_t received = request.received_micros ? request.received_micros : now;
  TensorCallback counted = [this, received, done = std::move(done),
                            expired = metrics_.expired](Result<TensorResult> r) {
    if (!r.ok() && r.status().code() == Status::Code::kDeadlineExceeded) expired->Inc();
    if (r.ok()) latency_.Record(clock_.NowMicros() - received);
    done(std::move(r));
  };
  std::vector<std::unique_ptr<BatchTask>> tasks;
  tasks.push_back(std::make_unique<TensorTask>(std::move(request), std::move(counted), *variant,
                                               rows, key, now, deadline));
  Status queued = scheduler_->Schedule(tasks);
  if (!queued.ok()) {
    if (queued.code() == Status::Code::kResourceExhausted) metrics_.rejected_queue_full->Inc();
    tasks.front()->Fail(queued);
  }
}

void TensorServable::ProcessBatch(Batch&& batch) {
  const int64_t start = clock_.NowMicros();
  std::vector<TensorTask*> tasks;
  for (auto& t : batch.tasks) tasks.push_back(static_cast<TensorTask*>(t.get()));
  TensorRequest& first = tasks.front()->request();
  const int variant_index = tasks.front()->variant();  // The batch key keeps variants apart.
  Variant& variant = *variants_[static_cast<size_t>(variant_index)];

  // Concatenate along the first axis (only when more than one request shares the batch).
  std::vector<Tensor> inputs;
  if (tasks.size() == 1) {
    inputs = std::move(first.inputs);
  } else {
    for (size_t i = 0; i < first.inputs.size(); ++i) {
      Tensor merged;
      merged.name = first.inputs[i].name;
      merged.type = first.inputs[i].type;
      merged.shape = first.inputs[i].shape;
      merged.shape[0] = batch.rows;
      for (TensorTask* t : tasks) {
        // Inputs are matched by name: requests may list them in any order.
        for (const auto& in : t->request().inputs) {
          if (in.name == merged.name) {
            merged.data.insert(merged.data.end(), in.data.begin(), in.data.end());
          }
        }
      }
      inputs.push_back(std::move(merged));
    }
  }
  const int64_t infer_start = clock_.NowMicros();
  auto outputs = variant.session->Run(inputs, first.outputs);
  const int64_t infer_end = clock_.NowMicros();
  busy_micros_ += infer_end - start;
  if (outputs.ok()) {
    // Exponentially weighted (1/8) time per row: the controller's speed comparison.
    const int64_t per_row = (infer_end - infer_start) * 1000 / std::max<int64_t>(1, batch.rows);
    const int64_t old = variant.nanos_per_row.load();
    variant.nanos_per_row.store(old == 0 ? per_row : old + (per_row - old) / 8);
  }
  metrics_.batches->Inc();
  metrics_.batch_size->Observe(static_cast<double>(batch.rows));
  metrics_.infer_seconds->Observe((infer_end - infer_start) / 1e6);
  metrics_.batch_seconds->Observe((infer_start - start) / 1e6);

  if (!outputs.ok()) {
    for (TensorTask* t : tasks) t->Fail(outputs.status());
    return;
  }
  if (tasks.size() > 1 && !SplitsByRow(*outputs, batch.rows)) {
    // An output whose free first axis is not the batch (e.g. the detections of the whole
    // batch, or a concatenation) cannot be split back by position: each request would get
    // rows of the others. Run the requests one by one instead; their inputs are intact, as
    // the merged tensors above were copies.
    for (auto& task : batch.tasks) {
      Batch alone;
      alone.rows = task->rows();
      alone.max_length = task->length();
      alone.formed_at_micros = batch.formed_at_micros;
      alone.tasks.push_back(std::move(task));
      ProcessBatch(std::move(alone));
    }
    return;
  }
  int64_t row_offset = 0;
  for (TensorTask* t : tasks) {
    const int64_t rows = t->rows();
    TensorResult result;
    result.model = config_.name;
    result.version = variant.session->file_digest();
    result.variant = config_.variants[static_cast<size_t>(variant_index)].name;
    result.timings = t->request().timings;
    result.timings.queue_micros = batch.formed_at_micros - t->enqueue_time_micros();
    result.timings.batch_micros = infer_start - batch.formed_at_micros;
    result.timings.infer_micros = infer_end - infer_start;
    result.timings.batch_rows = batch.rows;
    metrics_.queue_seconds->Observe(result.timings.queue_micros / 1e6);
    for (const Tensor& out : *outputs) {
      if (tasks.size() == 1) {
        result.outputs.push_back(out);
        continue;
      }
      Tensor part;
      part.name = out.name;
      part.type = out.type;
      part.shape = out.shape;
      part.shape[0] = rows;
      const size_t row_bytes = out.data.size() / static_cast<size_t>(batch.rows);
      part.data.assign(out.data.begin() + row_offset * row_bytes,
                       out.data.begin() + (row_offset + rows) * row_bytes);
      result.outputs.push_back(std::move(part));
    }
    row_offset += rows;
    if (Status s = ClassifyOutputs(t->request(), &result); !s.ok()) {
      t->Fail(s);
      continue;
    }
    t->Succeed(std::move(result));
  }
}

Status TensorServable::ClassifyOutputs(const TensorRequest& request, TensorResult* result) const {
  for (const OutputClassification& c : request.classifications) {
    for (Tensor& out : result->outputs) {
      if (out.name != c.output) continue;
      auto classes = Classify(out, c.top_k, labels_);
      if (!classes.ok()) return classes.status();
      out = std::move(classes).value();
    }
  }
  return Status::Ok();
}

ModelDescription TensorServable::Describe() const {
  ModelDescription d;
  d.name = config_.name;
  d.kind = std::string(ModelKindName(config_.kind));
  d.state = ModelState::kReady;
  const Variant& active = *variants_[static_cast<size_t>(selector_->active())];
  d.version = active.session->file_digest();
  d.max_batch_size = static_cast<int>(scheduler_->options().queue.max_batch_size);
  d.inputs = session_->inputs();
  d.outputs = session_->outputs();
  std::vector<std::string> digests, errors;
  for (const auto& v : variants_) {
    digests.push_back(v->session ? v->session->file_digest() : "");
    errors.push_back(v->error);
  }
  selector_->Describe(digests, errors, &d);
  return d;
}

}  // namespace tailcut
