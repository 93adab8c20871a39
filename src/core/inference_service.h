// InferenceService: the InferenceApi implementation. It owns the model repository (one
// folder per model), loads each model at start-up or lazily on first use, and routes
// requests to the model's servable. A lazy load happens exactly once however many requests
// arrive during it: they wait on the load and are served when it completes (or answered
// with its error).
//
// Thread-safety: every public method is safe from any thread. Shutdown() once.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/work_pool.h"
#include "core/generation_metrics.h"
#include "core/generative_servable.h"
#include "core/inference_api.h"
#include "core/semantic_cache_sync.h"
#include "core/semantic_output_cache.h"
#include "core/servable.h"
#include "core/servable_metrics.h"
#include "core/tensor_servable.h"
#include "core/text_embedding_servable.h"

namespace tailcut {

struct InferenceServiceOptions {
  // Folder holding one sub-folder per model (see engine/model_config.h).
  std::string model_repository = "models";
  // The model that the name "default" and requests without a model use. Empty = the first
  // text-embedding model found (by folder name). Generation's "default" is this model when it
  // is generative, else the first generative model found.
  std::string default_model;
  // Load models on first use instead of at start-up. Start-up is faster; the first request
  // to each model waits for its load.
  bool lazy_loading = false;
  OnnxSessionOptions session;
  TextServableOptions text;
  TensorServableOptions tensor;
  GenerativeServableOptions generative;
  // Embedding cache (core/embedding_cache.h): the in-process L1 tier is on unless
  // cache_enabled is false; the Redis L2 tier only when redis_enabled is set.
  bool cache_enabled = true;
  L1CacheOptions l1;
  bool redis_enabled = false;
  RedisOptions redis;
  EmbeddingCacheOptions cache;
  // Generated answers reused for requests asking the same question (off unless enabled).
  SemanticCacheOptions semantic_cache;
  // With Redis: the semantic cache's entries shared between replicas.
  SemanticCacheSyncOptions semantic_sync;
};

class InferenceService final : public InferenceApi {
 public:
  // Reads every model folder's configuration (not the models themselves).
  static Result<std::unique_ptr<InferenceService>> Create(const InferenceServiceOptions& options,
                                                          MetricsRegistry& metrics,
                                                          const Clock& clock = SystemClock::Get());
  ~InferenceService() override;

  // Loads the models that are not lazy, in parallel with nothing else; returns the first
  // error (the server still starts, and health reports the failed model).
  Status LoadStartupModels();
  // Marks the service as going away: Ready() turns false so load balancers stop sending,
  // while requests still arriving on open connections are served.
  void BeginDrain() { draining_ = true; }
  // Refuses new work, then stops every model's worker (draining queued work when asked).
  void Shutdown(bool drain);

  void Embed(EmbedRequest request, EmbedCallback done) override;
  // Removes a model's cached embeddings from every tier; the count removed.
  void FlushCache(const std::string& model, std::function<void(Result<int64_t>)> done);
  // Re-reads the model's folder and loads it anew (new weights, new variants) in the
  // background; requests keep being served by the old copy until the new one is loaded and
  // warm, then go to the new one, and the old one finishes its queued work. On failure the
  // old copy keeps serving and `done` gets the error.
  void ReloadModel(const std::string& model, std::function<void(const Status&)> done);
  // Pins (or, with an empty name, unpins) the variant serving a text model's unpinned
  // requests.
  Status SetActiveVariant(const std::string& model, const std::string& variant);
  EmbeddingCache* cache() const { return cache_.get(); }
  // The semantic output cache; null when off.
  SemanticOutputCache* semantic_cache() const { return semantic_cache_.get(); }
  // Its Redis log; null without Redis or when not shared.
  SemanticCacheSync* semantic_sync() const { return semantic_sync_.get(); }
  // Where continuations that must not run on a batch worker or a step loop go (the
  // semantic cache's replays and misses); unset = inline. Set once, before serving; the
  // semantic cache's Redis reader may already be running then (it posts what it adopts).
  void SetWorkPool(WorkPool* pool) { work_pool_.store(pool, std::memory_order_release); }
  void Infer(TensorRequest request, TensorCallback done) override;
  void Generate(GenerateRequest request, GenerationSinkPtr sink) override;
  std::vector<ModelDescription> ListModels() const override;
  Result<ModelDescription> DescribeModel(const std::string& name) const override;
  std::string default_model() const override { return default_model_; }
  bool Ready() const override;

 private:
  struct Entry {
    ModelConfig config;
    mutable std::mutex mutex;
    ModelState state = ModelState::kUnloaded;
    std::string error;
    // Of config.kind's class (TextEmbeddingServable, TensorServable, GenerativeServable);
    // null until loaded.
    std::shared_ptr<Servable> servable;
    std::vector<std::function<void(const Status&)>> waiters;  // Run when a load ends.
    bool reloading = false;

    // The servable as its kind's class; null when not loaded or of another kind. Under mutex.
    template <typename T>
    std::shared_ptr<T> As() const {
      return std::dynamic_pointer_cast<T>(servable);
    }
  };

  InferenceService(const InferenceServiceOptions& options, MetricsRegistry& metrics,
                   const Clock& clock);
  // The entry `name` names; "default" and "" mean the default model of `kind`: default_model_
  // (an embedding model, or the one the operator named), default_generative_model_ or
  // default_reranker_.
  Entry* Find(const std::string& name, ModelKind kind = ModelKind::kTextEmbedding) const;
  // Runs `then` once the model is ready (now, or when its load finishes), or with the error.
  void WithModel(Entry* entry, std::function<void(const Status&)> then);
  Status LoadEntry(Entry* entry);
  // Builds semantic_cache_ from options_.semantic_cache (Create(), once the entries are read).
  Status CreateSemanticCache();
  // The reranker policy's part of it: the reranker model, its operating points, its scorer.
  Status WireSemanticReranker(SemanticCacheOptions* options, SemanticOutputCache::Deps* deps);
  // Runs `request` (the semantic cache's embedding or reranking of a generation request's
  // prompt) within `generation`'s deadline and cancellation; `done` gets its rows.
  void EmbedForGeneration(const GenerateRequest& generation, EmbedRequest request,
                          std::function<void(Result<std::vector<float>>)> done);
  // Runs `work` on a loader thread; false (nothing runs) once shutting down.
  bool StartLoader(std::function<void()> work);
  Result<std::shared_ptr<Servable>> Build(const ModelConfig& config);
  ModelDescription DescribeEntry(const Entry& entry) const;

  const InferenceServiceOptions options_;
  MetricsRegistry& metrics_registry_;
  ServableMetricFamilies metric_families_;
  GenerationMetricFamilies generation_metric_families_;
  const Clock& clock_;
  // Declared before the entries (servables hold pointers to the cache); the destructor
  // releases them in the order their callbacks need.
  std::unique_ptr<L1Cache> l1_;
  std::unique_ptr<RedisClient> redis_;
  std::unique_ptr<EmbeddingCache> cache_;
  std::map<std::string, std::unique_ptr<Entry>> entries_;  // By name; fixed after Create().
  // After the entries: its lookups call Embed(), and the generations it records hold it.
  std::unique_ptr<SemanticOutputCache> semantic_cache_;
  std::unique_ptr<SemanticCacheSync> semantic_sync_;  // With Redis; stopped before redis_ goes.
  std::atomic<WorkPool*> work_pool_{nullptr};
  std::string default_model_;
  std::string default_generative_model_;
  std::string default_reranker_;  // The first reranker (by folder name).
  std::atomic<bool> shutting_down_{false};
  std::atomic<bool> draining_{false};
  std::atomic<bool> startup_loaded_{false};
  // Load and reload threads: finished ones are joined when the next starts, the rest at
  // shutdown.
  struct Loader {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> finished;
  };
  std::mutex loaders_mutex_;
  std::vector<Loader> loaders_;
};

}  // namespace tailcut
