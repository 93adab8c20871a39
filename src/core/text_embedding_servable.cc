#include "core/text_embedding_servable.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/embed_job.h"
#include "core/variant_eligibility.h"

namespace tailcut {

TextEmbeddingServable::TextEmbeddingServable(const ModelConfig& config,
                                             const TextServableOptions& options,
                                             const ServableMetrics& metrics, const Clock& clock)
    : config_(config),
      options_(options),
      metrics_(metrics),
      clock_(clock),
      latency_(options.precision_window_seconds, clock) {}

TextEmbeddingServable::~TextEmbeddingServable() { Stop(/*drain=*/false); }

Result<std::unique_ptr<TextEmbeddingServable>> TextEmbeddingServable::Load(
    const ModelConfig& config, const OnnxSessionOptions& session,
    const TextServableOptions& options, const ServableMetrics& metrics, EmbeddingCache* cache,
    const Clock& clock) {
  std::unique_ptr<TextEmbeddingServable> s(
      new TextEmbeddingServable(config, options, metrics, clock));
  s->cache_ = cache;
  if (cache) s->cache_tag_ = cache->TagFor(config.name);
  s->readout_ = "output=" + config.output + ";pooling=" +
                std::to_string(static_cast<int>(config.pooling)) +
                ";max_len=" + std::to_string(config.max_sequence_length);

  // Every variant loads and warms up now; a broken one is reported, not fatal, as long as
  // another serves.
  Status first_error;
  for (const VariantConfig& vc : config.variants) {
    auto v = std::make_unique<Variant>();
    v->config = vc;
    auto model = TextEmbeddingModel::Load(config, vc.file_path, session);
    if (model.ok()) {
      v->model = std::move(model).value();
    } else {
      v->error = model.status().message();
      if (first_error.ok()) first_error = model.status();
      spdlog::error("model '{}': variant '{}' failed to load: {}", config.name, vc.name, v->error);
    }
    s->variants_.push_back(std::move(v));
  }
  // The choice of variant (request pins, the controller, admin pins) is the selector's; the
  // controller moves only between two loaded, interchangeable variants (variant_eligibility.h)
  // and otherwise stays off and says why.
  std::vector<bool> loaded;
  for (const auto& v : s->variants_) loaded.push_back(v->model != nullptr);
  auto selector = VariantSelector::Create(config, loaded, options.precision, metrics, clock);
  if (!selector.ok()) return first_error.ok() ? selector.status() : first_error;
  s->selector_ = std::move(selector).value();
  const int active = s->selector_->active();

  BatchSchedulerOptions scheduler = options.scheduler;
  scheduler.max_queue_delay_micros = options.max_queue_delay_micros;
  scheduler.dropped_rows = s->metrics_.dropped_rows;
  if (config.max_batch_size > 0) {
    scheduler.queue.max_batch_size =
        std::min<int64_t>(scheduler.queue.max_batch_size, config.max_batch_size);
  }
  TextEmbeddingServable* self = s.get();
  s->scheduler_ = std::make_unique<BatchScheduler>(
      scheduler, [self](Batch&& batch) { self->ProcessBatch(std::move(batch)); }, clock);
  // Warm-up recomputes hot inputs from their ids alone; a reranker's pairs also need their
  // token types, and a pair of texts repeats far less than one text does.
  if (cache && options.warmup && config.kind != ModelKind::kReranker) {
    s->tracker_ = std::make_unique<HotKeyTracker>(options.warmup_tracker, clock);
    const TextEmbeddingModel& m = *s->variants_[static_cast<size_t>(active)]->model;
    cache->LoadHotSet(config.name, s->cache_tag_, static_cast<size_t>(m.dimensions()),
                      [metrics, name = config.name](size_t loaded) {
                        if (loaded == 0) return;
                        metrics.warmup->WithLabels({name, "loaded"}).Inc(static_cast<double>(loaded));
                        spdlog::info("model '{}': warmed L1 with {} hot entries from redis", name,
                                     loaded);
                      });
  }
  if (s->selector_->has_controller() || s->tracker_) {
    s->background_thread_ = std::thread([self] { self->BackgroundLoop(); });
  }
  return s;
}

void TextEmbeddingServable::Stop(bool drain) {
  gate_.Close();
  {
    std::lock_guard<std::mutex> lock(controller_mutex_);
    controller_stop_ = true;
  }
  controller_wake_.notify_all();
  if (background_thread_.joinable()) background_thread_.join();
  // Without drain, queued items fail now, so the requests waiting for them end at once.
  // With drain, the worker keeps running until every admitted request is answered (a Redis
  // lookup still in flight may yet queue its misses).
  if (scheduler_ && !drain) scheduler_->Stop(/*drain=*/false);
  gate_.WaitIdle(5000, [](int64_t in_flight) {
    spdlog::warn("stopping a model: still waiting for {} requests in flight", in_flight);
  });
  if (scheduler_) scheduler_->Stop(drain);
}

Status TextEmbeddingServable::SetActiveVariant(const std::string& name) {
  return selector_->Pin(name);
}

void TextEmbeddingServable::BackgroundLoop() {
  int64_t last_busy = busy_micros_.load();
  int64_t last_tick = clock_.NowMicros();
  const int64_t far = std::numeric_limits<int64_t>::max();
  int64_t next_control =
      selector_->has_controller() ? last_tick + options_.precision_interval_micros : far;
  const int64_t bucket = options_.warmup_tracker.bucket_micros;
  int64_t next_warmup = tracker_ ? (last_tick / bucket + 1) * bucket + bucket / 10 : far;
  const bool backfills =
      selector_->has_controller() && cache_ && options_.reference_backfill_rows_per_round > 0;
  int64_t next_backfill = backfills ? last_tick + options_.reference_backfill_interval_micros : far;
  int64_t backfill_busy = busy_micros_.load(), backfill_tick = last_tick;
  std::unique_lock<std::mutex> lock(controller_mutex_);
  while (!controller_stop_) {
    const int64_t wait = std::min({next_control, next_warmup, next_backfill}) - clock_.NowMicros();
    if (wait > 0) {
      controller_wake_.wait_for(lock, std::chrono::microseconds(wait));
      continue;
    }
    lock.unlock();
    const int64_t now = clock_.NowMicros();
    if (now >= next_control) {
      ControllerTick(&last_busy, &last_tick);
      next_control = now + options_.precision_interval_micros;
    }
    if (now >= next_backfill) {
      const int64_t busy = busy_micros_.load();
      BackfillRound(busy - backfill_busy, now - backfill_tick);
      backfill_busy = busy;
      backfill_tick = now;
      next_backfill = now + options_.reference_backfill_interval_micros;
    }
    if (now >= next_warmup) {
      WarmupRound();
      // Just after each bucket boundary, so the bucket that ended is in the forecast.
      next_warmup = (now / bucket + 1) * bucket + bucket / 10;
    }
    lock.lock();
  }
}

std::string TextEmbeddingServable::HotSetKey() const { return config_.name; }

Status TextEmbeddingServable::ScheduleCacheFill(const std::vector<int64_t>& ids,
                                                const CacheKey& key, int variant,
                                                bool normalize) {
  // A one-row job nobody waits for: its only effect is the cache store on completion.
  const TextEmbeddingModel& model = *variants_[static_cast<size_t>(variant)]->model;
  EmbedResult result;
  result.model = config_.name;
  result.dimensions = model.dimensions();
  result.token_counts = {static_cast<int32_t>(ids.size())};
  result.embeddings.resize(static_cast<size_t>(model.dimensions()));
  auto job = std::make_shared<EmbedJob>(std::move(result), [](Result<EmbedResult>) {});
  CacheTicket ticket;
  ticket.key = key;
  ticket.tag = cache_tag_;
  ticket.model = config_.name;
  ticket.write = true;
  std::vector<std::pair<EmbeddingCache::Item, std::optional<CacheTicket>>> one;
  one.emplace_back(EmbeddingCache::Item{0, ids, key, std::nullopt}, std::move(ticket));
  return ScheduleItems(job, variant, normalize, 0, std::move(one));
}

void TextEmbeddingServable::RememberForBackfill(std::vector<BackfillEntry> entries) {
  // Off (no rows per round): nothing is owed, or the controller would never come back.
  if (entries.empty() || options_.reference_backfill_rows_per_round == 0) return;
  std::lock_guard<std::mutex> lock(backfill_mutex_);
  for (auto& e : entries) {
    if (backfill_.size() >= options_.reference_backfill_max_keys) return;
    if (backfill_keys_.insert(e.key).second) backfill_.push_back(std::move(e));
  }
}

void TextEmbeddingServable::BackfillRound(int64_t busy_micros, int64_t interval_micros) {
  // Only in idle time: the reference rows are for later requests, never at the cost of a
  // client's latency now.
  if (selector_->accurate() < 0 || scheduler_->queued_rows() > 0 ||
      100 * busy_micros >= options_.reference_backfill_below_utilization_percent *
                               std::max<int64_t>(1, interval_micros) * Workers()) {
    return;
  }
  size_t filled = 0;
  while (filled < options_.reference_backfill_rows_per_round) {
    BackfillEntry e;
    {
      std::lock_guard<std::mutex> lock(backfill_mutex_);
      if (backfill_.empty()) break;
      e = std::move(backfill_.front());
      backfill_.pop_front();
      backfill_keys_.erase(e.key);
    }
    // Filled meanwhile (an fp32 computation of the same input): a lookup, not a place in
    // the round.
    if (cache_->l1() && cache_->l1()->Contains(e.key)) continue;
    if (ScheduleCacheFill(e.ids, e.key, selector_->accurate(), e.normalize).ok()) ++filled;
  }
  if (filled) metrics_.warmup->WithLabels({config_.name, "reference_backfill"}).Inc(filled);
}

size_t TextEmbeddingServable::ReferenceRowsOwed() {
  std::lock_guard<std::mutex> lock(backfill_mutex_);
  return backfill_.size();
}

void TextEmbeddingServable::WarmupRound() {
  const Variant& active = *variants_[static_cast<size_t>(selector_->active())];
  const size_t dims = static_cast<size_t>(active.model->dimensions());
  auto predictions = tracker_->PredictHot(options_.warmup_max_keys,
                                          static_cast<double>(options_.warmup_min_forecast));
  if (predictions.empty()) return;
  std::vector<CacheKey> hot;
  for (const auto& p : predictions) hot.push_back(p.key);
  cache_->PersistHotSet(HotSetKey(), hot);

  // Entries that are missing or would expire before the next round ends need warming.
  auto needs = std::make_shared<std::vector<HotKeyTracker::Prediction>>();
  std::vector<CacheKey> keys;
  for (auto& p : predictions) {
    const auto remaining = cache_->l1() ? cache_->l1()->RemainingTtlMicros(p.key) : std::nullopt;
    if (remaining && *remaining > options_.warmup_refresh_horizon_micros) continue;
    keys.push_back(p.key);
    needs->push_back(std::move(p));
  }
  if (needs->empty()) return;
  auto pass = gate_.Enter();  // The lookup's reply refers to this servable.
  if (!pass) return;
  cache_->Prefetch(config_.name, cache_tag_, dims, std::move(keys),
                   [this, pass, needs](std::vector<CacheKey> missing) {
    const size_t refreshed = needs->size() - missing.size();
    if (refreshed) metrics_.warmup->WithLabels({config_.name, "refreshed_from_l2"}).Inc(refreshed);
    size_t recomputed = 0;
    for (const auto& p : *needs) {
      if (std::find(missing.begin(), missing.end(), p.key) == missing.end()) continue;
      if (recomputed >= options_.warmup_max_recompute_per_bucket ||
          scheduler_->queued_rows() > 0 || static_cast<size_t>(p.variant) >= variants_.size() ||
          !variants_[static_cast<size_t>(p.variant)]->model) {
        metrics_.warmup->WithLabels({config_.name, "skipped_busy"}).Inc();
        continue;
      }
      if (ScheduleCacheFill(p.ids, p.key, p.variant, p.normalize).ok()) ++recomputed;
    }
    if (recomputed) metrics_.warmup->WithLabels({config_.name, "recomputed"}).Inc(recomputed);
  });
}

void TextEmbeddingServable::ControllerTick(int64_t* last_busy, int64_t* last_tick) {
  const int64_t now = clock_.NowMicros();
  const int64_t busy = busy_micros_.load();
  LoadSignals s =
      MeasureLoad(latency_, busy - *last_busy, now - *last_tick, Workers(),
                  variants_[static_cast<size_t>(selector_->accurate())]->nanos_per_token.load(),
                  variants_[static_cast<size_t>(selector_->fast())]->nanos_per_token.load());
  *last_busy = busy;
  *last_tick = now;
  s.reference_rows_owed = static_cast<int64_t>(ReferenceRowsOwed());
  selector_->Tick(s);
}

void TextEmbeddingServable::Embed(EmbedRequest request, EmbedCallback done,
                                  InFlightGate::Pass pass) {
  if (!pass) return done(Status::Unavailable("model '" + config_.name + "' is being unloaded"));
  const size_t n = request.inputs.size();
  if (n == 0) {
    return done(Status::InvalidArgument("'input' must contain at least one text"));
  }
  if (n > options_.max_inputs_per_request) {
    return done(Status::PayloadTooLarge("request has " + std::to_string(n) +
                                        " inputs; the limit is " +
                                        std::to_string(options_.max_inputs_per_request)));
  }
  // A reranker scores pairs, an embedding model single texts: the service routes each API to
  // its kind, so a mismatch here is a caller's bug, answered rather than guessed at.
  const bool pairs = config_.kind == ModelKind::kReranker;
  if (pairs != !request.second_inputs.empty() || (pairs && request.second_inputs.size() != n)) {
    return done(Status::InvalidArgument(
        pairs ? "model '" + config_.name + "' is a reranker: it scores pairs of texts, " +
                    std::to_string(n) + " first and " +
                    std::to_string(request.second_inputs.size()) + " second texts given"
              : "model '" + config_.name + "' embeds single texts, not pairs"));
  }
  auto variant = selector_->Choose(request.precision);
  if (!variant.ok()) return done(variant.status());
  const Variant& v = *variants_[static_cast<size_t>(*variant)];
  const TextEmbeddingModel& model = *v.model;

  // Tokenise on the caller's thread (the server's work pool, never an IO thread): it is
  // microseconds per text, and the batcher needs the lengths to group inputs.
  const int64_t tokenize_start = clock_.NowMicros();
  EncodeOptions encode;
  encode.truncate = request.truncate;
  std::vector<std::vector<int64_t>> ids(n);
  std::vector<std::vector<int64_t>> type_ids(pairs ? n : 0);
  EmbedResult result;
  result.model = config_.name;
  result.variant = v.config.name;
  if (selector_->accurate() >= 0) {
    result.reference_variant = variants_[static_cast<size_t>(selector_->accurate())]->config.name;
  }
  result.dimensions = model.dimensions();
  result.token_counts.resize(n);
  for (size_t i = 0; i < n; ++i) {
    auto enc =
        pairs ? model.tokenizer().EncodePair(request.inputs[i], request.second_inputs[i], encode)
              : model.tokenizer().Encode(request.inputs[i], encode);
    if (!enc.ok()) {
      return done(Status(enc.status().code(),
                         "input " + std::to_string(i) + ": " + enc.status().message()));
    }
    ids[i] = std::move(enc->ids);
    if (pairs) type_ids[i] = std::move(enc->type_ids);
    result.token_counts[i] = static_cast<int32_t>(ids[i].size());
  }
  const int64_t now = clock_.NowMicros();
  result.timings = request.timings;
  result.timings.tokenize_micros = now - tokenize_start;
  metrics_.tokenize_seconds->Observe(result.timings.tokenize_micros / 1e6);
  result.embeddings.resize(n * static_cast<size_t>(model.dimensions()));

  const bool normalize = request.normalize.value_or(config_.normalize);
  const int64_t received = request.received_micros ? request.received_micros : now;
  // Record every answered request's latency for the precision controller.
  // The pass lives in the job's callback: as long as anything can still complete the job
  // (a queued item, a Redis reply, a single-flight waiter), this servable stays valid.
  EmbedCallback recorded = [this, pass, received,
                            done = std::move(done)](Result<EmbedResult> r) {
    if (r.ok()) {
      latency_.Record(clock_.NowMicros() - received);
    } else if (r.status().code() == Status::Code::kDeadlineExceeded) {
      metrics_.expired->Inc();
    }
    done(std::move(r));
  };
  // Not make_shared: the cache's deadline timer holds a weak_ptr until the deadline, and
  // that must not keep the job's memory.
  std::shared_ptr<EmbedJob> job(
      new EmbedJob(std::move(result), std::move(recorded), std::move(request.cancellation)));
  int64_t deadline = request.deadline_micros;
  if (deadline == 0 && options_.default_timeout_micros > 0) {
    deadline = received + options_.default_timeout_micros;
  }
  const int variant_index = *variant;
  std::vector<EmbeddingCache::Item> items(n);
  for (size_t i = 0; i < n; ++i) {
    items[i] = {i, std::move(ids[i]), CacheKey{}, std::nullopt,
                pairs ? std::move(type_ids[i]) : std::vector<int64_t>{}};
  }

  if (!cache_) {
    std::vector<std::pair<EmbeddingCache::Item, std::optional<CacheTicket>>> direct;
    for (auto& item : items) direct.emplace_back(std::move(item), std::nullopt);
    Status queued = ScheduleItems(job, variant_index, normalize, deadline, std::move(direct));
    if (!queued.ok()) job->Fail(queued);
    return;
  }
  // The key covers the exact file of the variant that computes the row and the option that
  // changes it, so a precision switch or a reload can never be answered from another's entry.
  const CacheNamespace ns{config_.name, v.config.name, model.session().file_digest(),
                          readout_, normalize};
  // While the controller (not a pin) serves its fast variant, rows cached under the accurate
  // variant's key answer first: interchangeable by the eligibility rule, and more accurate.
  // Once the controller is back, lookups use the accurate key alone, so a fast variant's row
  // never answers an unpinned request then.
  std::optional<CacheNamespace> reference_ns;
  if (request.precision.empty() && variant_index == selector_->fast() &&
      selector_->accurate() >= 0 && !selector_->pinned()) {
    const Variant& ref = *variants_[static_cast<size_t>(selector_->accurate())];
    reference_ns = CacheNamespace{config_.name, ref.config.name, ref.model->session().file_digest(),
                                  readout_, normalize};
  }
  for (auto& item : items) {
    // A pair's key covers its token types too: the same ids split elsewhere (a text that
    // spells out the separator) is another input.
    std::vector<int64_t> keyed;
    if (!item.type_ids.empty()) {
      keyed.reserve(item.ids.size() * 2 + 1);
      keyed.assign(item.ids.begin(), item.ids.end());
      keyed.push_back(-1);  // Never an id: the types cannot read as more ids.
      keyed.insert(keyed.end(), item.type_ids.begin(), item.type_ids.end());
    }
    const std::span<const int64_t> key_ids = item.type_ids.empty() ? item.ids : keyed;
    item.key = MakeTextCacheKey(ns, key_ids);
    if (reference_ns) item.read_first = MakeTextCacheKey(*reference_ns, key_ids);
    if (tracker_) tracker_->Record(item.key, item.ids, variant_index, normalize);
  }
  EmbeddingCache::Request cache_request;
  cache_request.job = job;
  cache_request.tag = cache_tag_;
  cache_request.model = config_.name;
  cache_request.read = request.cache_read;
  cache_request.write = request.cache_write;
  cache_request.deadline_micros = deadline;
  cache_request.schedule = [this, job, variant_index, normalize, deadline](
                               std::vector<std::pair<EmbeddingCache::Item,
                                                     std::optional<CacheTicket>>>&& todo) {
    // Rows the fast variant is about to compute (and store) for an input that has no
    // reference row: the backfill owes that row. Hits never get here.
    std::vector<BackfillEntry> owed;
    for (const auto& [item, ticket] : todo) {
      // Pairs are not remembered (BackfillEntry holds single texts' ids only).
      if (item.read_first && ticket && ticket->write && item.type_ids.empty()) {
        owed.push_back({item.ids, *item.read_first, normalize});
      }
    }
    Status queued = ScheduleItems(job, variant_index, normalize, deadline, std::move(todo));
    if (queued.ok()) RememberForBackfill(std::move(owed));
    return queued;
  };
  cache_->Resolve(std::move(cache_request), std::move(items));
}

Status TextEmbeddingServable::ScheduleItems(
    const std::shared_ptr<EmbedJob>& job, int variant, bool normalize, int64_t deadline,
    std::vector<std::pair<EmbeddingCache::Item, std::optional<CacheTicket>>>&& items) {
  const int64_t now = clock_.NowMicros();
  std::vector<std::unique_ptr<BatchTask>> tasks;
  tasks.reserve(items.size());
  for (auto& [item, ticket] : items) {
    tasks.push_back(std::make_unique<EmbedItemTask>(
        job, item.index, TokenizedInput{std::move(item.ids), std::move(item.type_ids)}, variant,
        normalize, now, deadline, std::move(ticket), cache_));
  }
  // The scheduler admits by rows and by time (max_queue_delay_micros), whole or not at all.
  Status queued = scheduler_->Schedule(tasks);
  if (!queued.ok() && queued.code() == Status::Code::kResourceExhausted) {
    metrics_.rejected_queue_full->Inc();
  }
  return queued;
}

void TextEmbeddingServable::ProcessBatch(Batch&& batch) {
  const int64_t start = clock_.NowMicros();
  auto& first = static_cast<EmbedItemTask&>(*batch.tasks.front());
  Variant& variant = *variants_[static_cast<size_t>(first.variant())];
  const TextEmbeddingModel& model = *variant.model;
  const size_t dim = static_cast<size_t>(model.dimensions());

  thread_local std::vector<std::span<const int64_t>> spans;
  thread_local std::vector<std::span<const int64_t>> type_spans;
  thread_local std::vector<float> out;
  thread_local std::vector<float> normalized;
  spans.clear();
  type_spans.clear();
  const bool pairs = config_.kind == ModelKind::kReranker;
  int64_t real_tokens = 0;
  for (const auto& t : batch.tasks) {
    const auto& item = static_cast<const EmbedItemTask&>(*t);
    spans.emplace_back(item.ids());
    if (pairs) type_spans.emplace_back(item.type_ids());
    real_tokens += static_cast<int64_t>(item.ids().size());
  }
  out.resize(spans.size() * dim);

  const int64_t infer_start = clock_.NowMicros();
  Status s = model.EmbedBatch(spans, type_spans, out.data());
  const int64_t infer_end = clock_.NowMicros();
  const int64_t infer = infer_end - infer_start;

  busy_micros_.fetch_add(infer_end - start, std::memory_order_relaxed);
  if (s.ok() && batch.padded_tokens() > 0) {
    // EWMA (weight 1/16) of the variant's cost per padded token, in nanoseconds: the
    // controller compares the variants with it (admission has the scheduler's cost model).
    const int64_t sample = infer * 1000 / batch.padded_tokens();
    const int64_t old = variant.nanos_per_token.load(std::memory_order_relaxed);
    variant.nanos_per_token.store(old == 0 ? sample : old + (sample - old) / 16,
                                  std::memory_order_relaxed);
  }
  metrics_.batches->Inc();
  metrics_.batch_size->Observe(static_cast<double>(batch.rows));
  metrics_.batch_padded_tokens->Observe(static_cast<double>(batch.padded_tokens()));
  metrics_.batch_real_tokens->Observe(static_cast<double>(real_tokens));
  metrics_.input_tokens->Inc(static_cast<double>(real_tokens));
  metrics_.infer_seconds->Observe(infer / 1e6);
  metrics_.batch_seconds->Observe((infer_start - start) / 1e6);

  for (size_t i = 0; i < batch.tasks.size(); ++i) {
    auto& item = static_cast<EmbedItemTask&>(*batch.tasks[i]);
    if (!s.ok()) {
      item.Fail(s);
      continue;
    }
    const int64_t queued = batch.formed_at_micros - item.enqueue_time_micros();
    metrics_.queue_seconds->Observe(queued / 1e6);
    std::span<const float> row(out.data() + i * dim, dim);
    if (item.normalize()) {
      normalized.assign(row.begin(), row.end());
      NormalizeL2(normalized);
      row = normalized;
    }
    if (std::any_of(row.begin(), row.end(), [](float x) { return !std::isfinite(x); })) {
      // A broken model (or input that overflows it): fail loudly, and before Complete(),
      // which would store the row in the caches and hand it to every waiting request.
      item.Fail(Status::Internal(
          "model '" + config_.name + "' (variant '" + variant.config.name +
          "') produced a non-finite value (NaN or infinity) in its output '" +
          (config_.output.empty() ? model.session().outputs().front().name : config_.output) +
          "'"));
      continue;
    }
    item.Complete(row, queued, infer_start - batch.formed_at_micros, infer, batch.rows);
  }
}

ModelDescription TextEmbeddingServable::Describe() const {
  const Variant& active = *variants_[static_cast<size_t>(selector_->active())];
  const TextEmbeddingModel& model = *active.model;
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
  std::vector<std::string> digests, errors;
  for (const auto& v : variants_) {
    digests.push_back(v->model ? v->model->session().file_digest() : "");
    errors.push_back(v->error);
  }
  selector_->Describe(digests, errors, &d);
  return d;
}

}  // namespace tailcut
