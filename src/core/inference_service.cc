#include "core/inference_service.h"

#include <spdlog/spdlog.h>

#include <filesystem>

#include "cache/redis_cluster_client.h"

namespace tailcut {
namespace fs = std::filesystem;

std::string_view ModelStateName(ModelState state) {
  switch (state) {
    case ModelState::kUnloaded:
      return "UNLOADED";
    case ModelState::kLoading:
      return "LOADING";
    case ModelState::kReady:
      return "READY";
    case ModelState::kFailed:
      return "UNAVAILABLE";
  }
  return "UNKNOWN";
}

std::string ServedVariants(const EmbedResult& result) {
  if (result.reference_rows == 0) return result.variant;
  if (result.reference_rows == static_cast<int64_t>(result.token_counts.size())) {
    return result.reference_variant;
  }
  return result.reference_variant + "," + result.variant;
}

InferenceService::InferenceService(const InferenceServiceOptions& options, MetricsRegistry& metrics,
                                   const Clock& clock)
    : options_(options),
      metrics_registry_(metrics),
      metric_families_(metrics),
      generation_metric_families_(metrics),
      clock_(clock) {}

InferenceService::~InferenceService() {
  // Every servable has answered what it admitted and nothing refers to it any more
  // (TextEmbeddingServable::Stop waits for that); then the Redis client, whose destructor
  // calls its pending callbacks (cache writes, lock releases, admin flushes) with an error
  // while the cache they point into still exists; the cache and L1 last.
  Shutdown(/*drain=*/false);
  entries_.clear();
  // The semantic cache's log stops polling before the Redis client goes (whose destructor
  // answers the log's pending calls, which then find it stopped); the cache goes after both.
  if (semantic_sync_) semantic_sync_->Stop();
  redis_.reset();
  semantic_sync_.reset();
  semantic_cache_.reset();
  cache_.reset();
  l1_.reset();
}

Result<std::unique_ptr<InferenceService>> InferenceService::Create(
    const InferenceServiceOptions& options, MetricsRegistry& metrics, const Clock& clock) {
  std::unique_ptr<InferenceService> s(new InferenceService(options, metrics, clock));
  if (options.cache_enabled) {
    s->l1_ = std::make_unique<L1Cache>(options.l1, clock, &metrics);
  }
  if (options.redis_enabled && !options.redis.cluster_nodes.empty()) {
    auto cluster = RedisClusterClient::Create(options.redis, clock, &metrics);
    if (!cluster.ok()) return cluster.status();
    s->redis_ = std::move(cluster).value();
    spdlog::info("L2 cache: redis cluster, seeds {} prefix '{}'{}", options.redis.cluster_nodes,
                 options.redis.key_prefix,
                 options.redis.password.empty() ? "" : " (with password)");
  } else if (options.redis_enabled) {
    s->redis_ = std::make_unique<RedisClientImpl>(options.redis, clock, &metrics);
    spdlog::info("L2 cache: redis at {}:{} db {} prefix '{}'{}", options.redis.host,
                 options.redis.port, options.redis.db, options.redis.key_prefix,
                 options.redis.password.empty() ? "" : " (with password)");
  }
  if (s->l1_ || s->redis_) {
    s->cache_ = std::make_unique<EmbeddingCache>(options.cache, s->l1_.get(), s->redis_.get(),
                                                 clock, &metrics);
  }
  std::error_code ec;
  if (!fs::is_directory(options.model_repository, ec)) {
    return Status::NotFound("model repository '" + options.model_repository + "' is not a folder");
  }
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(options.model_repository, ec)) {
    if (e.is_directory()) dirs.push_back(e.path());
  }
  std::sort(dirs.begin(), dirs.end());
  for (const auto& dir : dirs) {
    auto config = LoadModelConfig(dir.string());
    if (!config.ok()) {
      // A folder that is not a model (no model.yaml, no model.onnx) is skipped; a broken
      // configuration is reported and skipped so the other models still serve.
      if (config.status().code() != Status::Code::kNotFound) {
        spdlog::error("skipping model folder {}: {}", dir.string(), config.status().message());
      }
      continue;
    }
    if (s->entries_.count(config->name)) {
      return Status::InvalidArgument("two model folders declare the name '" + config->name + "'");
    }
    auto entry = std::make_unique<Entry>();
    entry->config = *config;
    if (s->default_model_.empty() && options.default_model.empty() &&
        config->kind == ModelKind::kTextEmbedding) {
      s->default_model_ = config->name;
    }
    if (s->default_generative_model_.empty() && config->kind == ModelKind::kGenerative) {
      s->default_generative_model_ = config->name;
    }
    if (s->default_reranker_.empty() && config->kind == ModelKind::kReranker) {
      s->default_reranker_ = config->name;
    }
    s->entries_.emplace(config->name, std::move(entry));
  }
  if (!options.default_model.empty()) {
    if (!s->entries_.count(options.default_model)) {
      return Status::NotFound("default model '" + options.default_model +
                              "' is not in the repository '" + options.model_repository + "'");
    }
    s->default_model_ = options.default_model;
    if (s->entries_.at(options.default_model)->config.kind == ModelKind::kGenerative) {
      s->default_generative_model_ = options.default_model;
    }
  }
  if (s->entries_.empty()) {
    return Status::NotFound("model repository '" + options.model_repository +
                            "' holds no model folders");
  }
  auto* raw = s.get();
  if (options.semantic_cache.enabled) {
    if (Status st = raw->CreateSemanticCache(); !st.ok()) return st;
  }
  metrics.AddCollectHook(
      [raw, &gauge = metrics.AddGauge("tailcut_queue_rows",
                                      "Inputs waiting in a model's batch queue", {"model"})] {
        for (const auto& [name, entry] : raw->entries_) {
          std::lock_guard<std::mutex> lock(entry->mutex);
          const int64_t rows = entry->servable ? entry->servable->queued_rows() : 0;
          if (entry->state == ModelState::kReady)
            gauge.WithLabels({name}).Set(static_cast<double>(rows));
        }
      });
  return s;
}

Status InferenceService::CreateSemanticCache() {
  // What the cache runs with: the configuration, its embedding model and variant resolved
  // (so that /admin/semantic-cache shows which vector space the queries are in).
  SemanticCacheOptions o = options_.semantic_cache;
  SemanticOutputCache::Deps deps;
  deps.metrics = &metrics_registry_;
  deps.clock = &clock_;
  deps.post = [this](std::function<void()> task) {
    if (WorkPool* pool = work_pool_.load(std::memory_order_acquire)) {
      pool->Submit(WorkPool::Lane::kLight, std::move(task));
    } else {
      task();
    }
  };
  if (o.policy == "verifier") {
    auto verifier = SemanticVerifier::Default();
    if (!verifier.ok()) return verifier.status();
    deps.verifier = std::make_shared<const SemanticVerifier>(std::move(verifier).value());
  }
  std::string measured_on = deps.verifier ? deps.verifier->embedding_variant() : "";
  if (o.policy == "reranker") {
    if (Status s = WireSemanticReranker(&o, &deps); !s.ok()) return s;
    measured_on = deps.reranker_points->embedding_variant;
  }
  if (o.policy != "exact") {
    const Entry* model = Find(o.embedding_model.empty() ? default_model_ : o.embedding_model);
    if (!model || model->config.kind != ModelKind::kTextEmbedding) {
      return Status::InvalidArgument("semantic.embedding_model '" + o.embedding_model +
                                     "' is not a text-embedding model of the repository" +
                                     (o.embedding_model.empty()
                                          ? " (empty: the default model, '" + default_model_ + "')"
                                          : std::string()));
    }
    // Pinned to one variant: the verifier's operating points are measured in one vector space,
    // and a precision switch under load must not move the queries out of it.
    auto variant = SemanticEmbeddingVariant(o, measured_on, model->config);
    if (!variant.ok()) return variant.status();
    o.embedding_model = model->config.name;
    o.embedding_variant = *variant;
    spdlog::info("semantic output cache: queries embedded by '{}', variant '{}'", o.embedding_model,
                 o.embedding_variant);
    deps.embed = [this, name = model->config.name, variant = *variant](
                     const GenerateRequest& r, const std::string& text,
                     std::function<void(Result<std::vector<float>>)> done) {
      EmbedRequest e;
      e.model = name;
      e.inputs = {text};
      e.normalize = true;
      e.precision = variant;
      EmbedForGeneration(r, std::move(e), std::move(done));
    };
  }
  const bool shared = redis_ && options_.semantic_sync.enabled;
  if (shared) {
    // semantic_sync_ is set below, before any request can insert.
    deps.publish = [this](const SemanticEntry& entry) {
      if (semantic_sync_) semantic_sync_->Publish(entry);
    };
  }
  auto post = deps.post;
  auto cache = SemanticOutputCache::Create(o, std::move(deps));
  if (!cache.ok()) return cache.status();
  semantic_cache_ = std::move(cache).value();
  if (shared) {
    semantic_sync_ =
        std::make_unique<SemanticCacheSync>(options_.semantic_sync, *redis_, *semantic_cache_,
                                            std::move(post), o.store.ttl_micros, clock_);
    semantic_sync_->Start();
  }
  spdlog::info(
      "semantic output cache: policy {}{}{}", o.policy,
      o.policy == "verifier" || o.policy == "reranker"
          ? fmt::format(", probability threshold {:.3f}", semantic_cache_->verifier_threshold())
          : std::string(),
      shared ? ", shared through Redis" : "");
  return Status::Ok();
}

Status InferenceService::WireSemanticReranker(SemanticCacheOptions* o,
                                              SemanticOutputCache::Deps* deps) {
  const Entry* reranker = Find(o->reranker_model, ModelKind::kReranker);
  if (!reranker || reranker->config.kind != ModelKind::kReranker) {
    return Status::InvalidArgument(
        "semantic.reranker_model '" + o->reranker_model + "' is not a reranker of the repository" +
        (o->reranker_model.empty() ? " (empty: the first reranker, and the repository has none)"
                                   : std::string()));
  }
  const std::string path =
      (std::filesystem::path(reranker->config.dir) / "semantic_operating_points.json").string();
  auto points = SemanticRerankerDocument::Load(path);
  if (!points.ok()) return points.status();
  bool has_variant = false;
  for (const auto& v : reranker->config.variants) has_variant |= v.name == points->reranker_variant;
  if (!has_variant) {
    return Status::InvalidArgument("'" + path + "' was measured on variant '" +
                                   points->reranker_variant + "', which reranker '" +
                                   reranker->config.name + "' does not have");
  }
  o->reranker_model = reranker->config.name;
  spdlog::info("semantic output cache: candidates scored by reranker '{}', variant '{}'",
               o->reranker_model, points->reranker_variant);
  deps->reranker_points =
      std::make_shared<const SemanticRerankerDocument>(std::move(points).value());
  // Pinned to the measured variant, as the embedding is: the operating points hold there.
  deps->rerank =
      [this, name = o->reranker_model, variant = deps->reranker_points->reranker_variant](
          const GenerateRequest& r, const std::string& query, std::vector<std::string> cached,
          std::function<void(Result<std::vector<float>>)> done) {
        EmbedRequest e;
        e.model = name;
        e.inputs.assign(cached.size(), query);
        e.second_inputs = std::move(cached);
        e.truncate = true;
        e.precision = variant;
        EmbedForGeneration(r, std::move(e), std::move(done));
      };
  return Status::Ok();
}

void InferenceService::EmbedForGeneration(const GenerateRequest& generation, EmbedRequest request,
                                          std::function<void(Result<std::vector<float>>)> done) {
  request.received_micros = generation.received_micros;
  request.deadline_micros = generation.deadline_micros;
  request.cancellation = generation.cancellation;
  Embed(std::move(request), [done = std::move(done)](Result<EmbedResult> result) {
    if (!result.ok()) return done(result.status());
    done(std::move(result->embeddings));
  });
}

Result<std::shared_ptr<Servable>> InferenceService::Build(const ModelConfig& config) {
  switch (config.kind) {
    case ModelKind::kTextEmbedding:
    case ModelKind::kReranker: {
      auto loaded =
          TextEmbeddingServable::Load(config, options_.session, options_.text,
                                      metric_families_.ForModel(config.name), cache_.get(), clock_);
      if (!loaded.ok()) return loaded.status();
      return std::shared_ptr<Servable>(std::move(loaded).value());
    }
    case ModelKind::kTensor: {
      // The precision.* settings are the server's, for every ONNX model (they bind to the
      // text options).
      TensorServableOptions tensor = options_.tensor;
      tensor.precision = options_.text.precision;
      tensor.precision_interval_micros = options_.text.precision_interval_micros;
      tensor.precision_window_seconds = options_.text.precision_window_seconds;
      auto loaded = TensorServable::Load(config, options_.session, tensor,
                                         metric_families_.ForModel(config.name), clock_);
      if (!loaded.ok()) return loaded.status();
      return std::shared_ptr<Servable>(std::move(loaded).value());
    }
    case ModelKind::kGenerative: {
      auto loaded = GenerativeServable::Load(
          config, options_.generative,
          generation_metric_families_.ForModel(config.name, metric_families_.precision_active(),
                                               metric_families_.precision_switches()),
          clock_);
      if (!loaded.ok()) return loaded.status();
      return std::shared_ptr<Servable>(std::move(loaded).value());
    }
  }
  return Status::Internal("unknown model kind");
}

Status InferenceService::LoadEntry(Entry* entry) {
  const ModelConfig& config = entry->config;
  const int64_t start = clock_.NowMicros();
  spdlog::info("loading model '{}' ({}) from {}", config.name, ModelKindName(config.kind),
               config.file_path);
  Status status;
  std::shared_ptr<Servable> servable;
  auto built = Build(config);
  if (built.ok()) {
    servable = std::move(built).value();
  } else {
    status = built.status();
  }
  std::vector<std::function<void(const Status&)>> waiters;
  {
    std::lock_guard<std::mutex> lock(entry->mutex);
    if (status.ok()) {
      entry->state = ModelState::kReady;
      entry->servable = std::move(servable);
      entry->error.clear();
    } else {
      entry->state = ModelState::kFailed;
      entry->error = status.message();
    }
    waiters.swap(entry->waiters);
  }
  if (status.ok()) {
    spdlog::info("model '{}' ready in {} ms (loaded and warmed up)", config.name,
                 (clock_.NowMicros() - start) / 1000);
  } else {
    spdlog::error("model '{}' failed to load: {}", config.name, status.message());
  }
  const Status for_waiters =
      status.ok()
          ? status
          : Status::Unavailable("model '" + config.name + "' failed to load: " + status.message());
  for (auto& w : waiters) w(for_waiters);
  return status;
}

Status InferenceService::LoadStartupModels() {
  Status first;
  if (!options_.lazy_loading) {
    for (auto& [name, entry] : entries_) {
      {
        std::lock_guard<std::mutex> lock(entry->mutex);
        if (entry->state != ModelState::kUnloaded) continue;
        entry->state = ModelState::kLoading;
      }
      Status s = LoadEntry(entry.get());
      if (!s.ok() && first.ok()) first = s;
    }
  }
  startup_loaded_ = true;
  return first;
}

void InferenceService::Shutdown(bool drain) {
  if (shutting_down_.exchange(true)) return;
  {
    std::lock_guard<std::mutex> lock(loaders_mutex_);
    for (auto& l : loaders_) l.thread.join();
    loaders_.clear();
  }
  for (auto& [name, entry] : entries_) {
    std::shared_ptr<Servable> servable;
    {
      std::lock_guard<std::mutex> lock(entry->mutex);
      servable = entry->servable;
    }
    if (servable) servable->Stop(drain);
  }
}

InferenceService::Entry* InferenceService::Find(const std::string& name, ModelKind kind) const {
  const bool is_default = name.empty() || name == "default";
  const std::string& key = !is_default                      ? name
                           : kind == ModelKind::kGenerative ? default_generative_model_
                           : kind == ModelKind::kReranker   ? default_reranker_
                                                            : default_model_;
  auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : it->second.get();
}

void InferenceService::WithModel(Entry* entry, std::function<void(const Status&)> then) {
  bool start_load = false;
  {
    std::lock_guard<std::mutex> lock(entry->mutex);
    switch (entry->state) {
      case ModelState::kReady:
        break;
      case ModelState::kFailed:
        return then(Status::Unavailable("model '" + entry->config.name +
                                        "' failed to load: " + entry->error));
      case ModelState::kUnloaded:
        entry->state = ModelState::kLoading;
        start_load = true;
        entry->waiters.push_back(std::move(then));
        break;
      case ModelState::kLoading:
        entry->waiters.push_back(std::move(then));
        return;
    }
  }
  if (!start_load) return then(Status::Ok());
  // Load off the caller's (IO) thread; everything that arrives meanwhile waits in `waiters`.
  if (StartLoader([this, entry] { (void)LoadEntry(entry); })) return;
  std::vector<std::function<void(const Status&)>> waiters;
  {
    std::lock_guard<std::mutex> lock(entry->mutex);
    entry->state = ModelState::kUnloaded;
    waiters.swap(entry->waiters);
  }
  for (auto& w : waiters) w(Status::Unavailable("server is shutting down"));
}

bool InferenceService::StartLoader(std::function<void()> work) {
  std::lock_guard<std::mutex> lock(loaders_mutex_);
  if (shutting_down_) return false;
  // Finished loaders are joined here, so a long-lived server does not keep one exited thread
  // per reload until shutdown.
  std::erase_if(loaders_, [](Loader& l) {
    if (!l.finished->load()) return false;
    l.thread.join();  // It has returned from its work: this is immediate.
    return true;
  });
  auto finished = std::make_shared<std::atomic<bool>>(false);
  std::thread thread([work = std::move(work), finished] {
    work();
    finished->store(true);
  });
  loaders_.push_back({std::move(thread), std::move(finished)});
  return true;
}

void InferenceService::Embed(EmbedRequest request, EmbedCallback done) {
  if (shutting_down_) return done(Status::Unavailable("server is shutting down"));
  const bool pairs = !request.second_inputs.empty();
  Entry* entry = Find(request.model, pairs ? ModelKind::kReranker : ModelKind::kTextEmbedding);
  if (!entry) {
    if (pairs && (request.model.empty() || request.model == "default")) {
      return done(Status::NotFound("no reranker is served"));
    }
    return done(Status::NotFound("model '" + request.model + "' does not exist"));
  }
  if (entry->config.kind == ModelKind::kGenerative) {
    return done(Status::InvalidArgument("model '" + entry->config.name +
                                        "' is a generative model; use /v1/completions or "
                                        "/v1/chat/completions"));
  }
  if (!IsTextModel(entry->config.kind)) {
    return done(Status::InvalidArgument("model '" + entry->config.name +
                                        "' is not a text-embedding model; use "
                                        "/v2/models/" +
                                        entry->config.name + "/infer"));
  }
  if (pairs != (entry->config.kind == ModelKind::kReranker)) {
    return done(Status::InvalidArgument(
        pairs ? "model '" + entry->config.name + "' is a text-embedding model, not a reranker"
              : "model '" + entry->config.name +
                    "' is a reranker: send a query and texts to /rerank"));
  }
  auto shared_request = std::make_shared<EmbedRequest>(std::move(request));
  auto shared_done = std::make_shared<EmbedCallback>(std::move(done));
  WithModel(entry, [entry, shared_request, shared_done](const Status& s) {
    if (!s.ok()) return (*shared_done)(s);
    std::shared_ptr<TextEmbeddingServable> text;
    InFlightGate::Pass pass;
    {
      // Admitted under the lock a reload swaps the servable under: the request either holds
      // a pass of the copy it picked (which a reload then waits for) or sees the new copy.
      std::lock_guard<std::mutex> lock(entry->mutex);
      text = entry->As<TextEmbeddingServable>();
      pass = text->Admit();
    }
    if (!pass) return (*shared_done)(Status::Unavailable("server is shutting down"));
    text->Embed(std::move(*shared_request), std::move(*shared_done), std::move(pass));
  });
}

void InferenceService::Infer(TensorRequest request, TensorCallback done) {
  if (shutting_down_) return done(Status::Unavailable("server is shutting down"));
  Entry* entry = Find(request.model);
  if (!entry) return done(Status::NotFound("model '" + request.model + "' does not exist"));
  if (entry->config.kind == ModelKind::kGenerative) {
    return done(Status::InvalidArgument("model '" + entry->config.name +
                                        "' is a generative model; use /v1/completions or "
                                        "/v1/chat/completions"));
  }
  if (entry->config.kind == ModelKind::kReranker) {
    return done(Status::InvalidArgument("model '" + entry->config.name +
                                        "' is a reranker; send a query and texts to /rerank"));
  }
  if (entry->config.kind != ModelKind::kTensor) {
    return done(Status::InvalidArgument(
        "model '" + entry->config.name +
        "' is a text-embedding model; send texts to /v1/embeddings or /embed"));
  }
  auto shared_request = std::make_shared<TensorRequest>(std::move(request));
  auto shared_done = std::make_shared<TensorCallback>(std::move(done));
  WithModel(entry, [entry, shared_request, shared_done](const Status& s) {
    if (!s.ok()) return (*shared_done)(s);
    std::shared_ptr<TensorServable> tensor;
    {
      std::lock_guard<std::mutex> lock(entry->mutex);
      tensor = entry->As<TensorServable>();
    }
    tensor->Infer(std::move(*shared_request), std::move(*shared_done));
  });
}

void InferenceService::Generate(GenerateRequest request, GenerationSinkPtr sink) {
  if (shutting_down_) return sink->OnEnd(Status::Unavailable("server is shutting down"));
  Entry* entry = Find(request.model, ModelKind::kGenerative);
  if (!entry) {
    if (request.model.empty() || request.model == "default") {
      return sink->OnEnd(Status::NotFound("no generative model is served"));
    }
    return sink->OnEnd(Status::NotFound("model '" + request.model + "' does not exist"));
  }
  if (entry->config.kind != ModelKind::kGenerative) {
    return sink->OnEnd(Status::InvalidArgument(
        "model '" + entry->config.name + "' is a " +
        std::string(ModelKindName(entry->config.kind)) + " model, not a generative one; " +
        (entry->config.kind == ModelKind::kReranker ? "send a query and texts to /rerank"
         : entry->config.kind == ModelKind::kTextEmbedding
             ? "send texts to /v1/embeddings"
             : "send tensors to /v2/models/" + entry->config.name + "/infer")));
  }
  auto generate = [this, entry](GenerateRequest request, GenerationSinkPtr sink) {
    auto shared_request = std::make_shared<GenerateRequest>(std::move(request));
    WithModel(entry, [entry, shared_request, sink](const Status& s) {
      if (!s.ok()) return sink->OnEnd(s);
      std::shared_ptr<GenerativeServable> generative;
      InFlightGate::Pass pass;
      {
        // As for Embed: admitted to the copy picked under the lock a reload swaps it under.
        std::lock_guard<std::mutex> lock(entry->mutex);
        generative = entry->As<GenerativeServable>();
        pass = generative->Admit();
      }
      generative->Generate(std::move(*shared_request), sink, std::move(pass));
    });
  };
  // The semantic output cache first: a hit never reaches the model's queue.
  if (semantic_cache_) {
    return semantic_cache_->Generate(std::move(request), entry->config.name, std::move(sink),
                                     std::move(generate));
  }
  generate(std::move(request), std::move(sink));
}

void InferenceService::ReloadModel(const std::string& model,
                                   std::function<void(const Status&)> done) {
  Entry* entry = Find(model);
  if (!entry) return done(Status::NotFound("model '" + model + "' does not exist"));
  {
    std::lock_guard<std::mutex> lock(entry->mutex);
    if (entry->reloading || entry->state == ModelState::kLoading) {
      return done(
          Status::FailedPrecondition("model '" + entry->config.name + "' is already loading"));
    }
    entry->reloading = true;
  }
  auto shared_done = std::make_shared<std::function<void(const Status&)>>(std::move(done));
  const bool started = StartLoader([this, entry, shared_done] {
    auto& done = *shared_done;
    const int64_t start = clock_.NowMicros();
    auto config = LoadModelConfig(entry->config.dir);
    Status status = config.status();
    if (status.ok() && (config->name != entry->config.name || config->kind != entry->config.kind)) {
      status = Status::InvalidArgument("a reload cannot change a model's name or kind");
    }
    Result<std::shared_ptr<Servable>> built =
        status.ok() ? Build(*config) : Result<std::shared_ptr<Servable>>(status);
    if (!built.ok()) {
      {
        std::lock_guard<std::mutex> lock(entry->mutex);
        entry->reloading = false;
      }
      spdlog::error("reload of model '{}' failed; the previous version keeps serving: {}",
                    entry->config.name, built.status().message());
      return done(built.status());
    }
    std::shared_ptr<Servable> old;
    {
      std::lock_guard<std::mutex> lock(entry->mutex);
      old = std::move(entry->servable);
      entry->servable = std::move(built).value();
      entry->state = ModelState::kReady;
      entry->error.clear();
      entry->reloading = false;
    }
    spdlog::info("model '{}' reloaded in {} ms", entry->config.name,
                 (clock_.NowMicros() - start) / 1000);
    done(Status::Ok());
    // The old copy answers every request it admitted (they hold passes taken under the
    // entry's lock, so none can arrive after this), then stops; it is destroyed when the last
    // reference to it goes (here, or in a request that still held one).
    if (old) old->Stop(/*drain=*/true);
  });
  if (started) return;
  {
    std::lock_guard<std::mutex> entry_lock(entry->mutex);
    entry->reloading = false;
  }
  (*shared_done)(Status::Unavailable("server is shutting down"));
}

void InferenceService::FlushCache(const std::string& model,
                                  std::function<void(Result<int64_t>)> done) {
  Entry* entry = Find(model);
  if (!entry) return done(Status::NotFound("model '" + model + "' does not exist"));
  if (!cache_) return done(int64_t{0});
  cache_->Flush(cache_->TagFor(entry->config.name), entry->config.name, std::move(done));
}

Status InferenceService::SetActiveVariant(const std::string& model, const std::string& variant) {
  Entry* entry = Find(model);
  if (!entry) return Status::NotFound("model '" + model + "' does not exist");
  std::shared_ptr<Servable> servable;
  {
    std::lock_guard<std::mutex> lock(entry->mutex);
    servable = entry->servable;
  }
  if (!servable) {
    return Status::FailedPrecondition("model '" + entry->config.name + "' is not loaded");
  }
  return servable->SetActiveVariant(variant);
}

ModelDescription InferenceService::DescribeEntry(const Entry& entry) const {
  std::lock_guard<std::mutex> lock(entry.mutex);
  ModelDescription d;
  if (entry.servable) {
    d = entry.servable->Describe();
  } else {
    d.name = entry.config.name;
    d.kind = std::string(ModelKindName(entry.config.kind));
    d.max_sequence_length = entry.config.max_sequence_length;
    if (entry.config.kind == ModelKind::kGenerative) {
      d.context_tokens = entry.config.generation.context_tokens;
      d.max_sequences = entry.config.generation.max_sequences;
      d.max_sequence_length = d.context_tokens;
    }
  }
  d.state = entry.state;
  d.error = entry.error;
  return d;
}

std::vector<ModelDescription> InferenceService::ListModels() const {
  std::vector<ModelDescription> out;
  for (const auto& [name, entry] : entries_) out.push_back(DescribeEntry(*entry));
  return out;
}

Result<ModelDescription> InferenceService::DescribeModel(const std::string& name) const {
  const Entry* entry = Find(name);
  if (!entry) return Status::NotFound("model '" + name + "' does not exist");
  return DescribeEntry(*entry);
}

bool InferenceService::Ready() const {
  if (shutting_down_ || draining_ || !startup_loaded_) return false;
  if (options_.lazy_loading) return true;
  for (const auto& [name, entry] : entries_) {
    std::lock_guard<std::mutex> lock(entry->mutex);
    if (entry->state != ModelState::kReady) return false;
  }
  return true;
}

}  // namespace tailcut
