#include "core/semantic_output_cache.h"

#include <spdlog/spdlog.h>
#include <xxhash.h>

#include <cstring>
#include <random>
#include <utility>

namespace tailcut {

namespace {

// Appends a length-prefixed field, so that no two different field lists serialise alike.
void Field(std::string* out, std::string_view value) {
  const auto n = static_cast<uint32_t>(value.size());
  out->append(reinterpret_cast<const char*>(&n), sizeof(n));
  out->append(value);
}

template <typename T>
void Number(std::string* out, T value) {
  out->append(reinterpret_cast<const char*>(&value), sizeof(value));
}

std::string Hex64(uint64_t v) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[static_cast<size_t>(i)] = kDigits[v & 15];
  return s;
}

// The query text (what may differ between two requests sharing an answer) and the partition
// key (everything else), per the header's step 2.
void SplitRequest(const GenerateRequest& r, const std::string& model, std::string* partition,
                  std::string* query) {
  std::string key;
  Field(&key, model);
  Field(&key, r.precision);
  Number(&key, static_cast<uint8_t>(r.chat));
  if (r.chat) {
    const size_t n = r.messages.size();
    const bool last_is_query = n > 0 && r.messages[n - 1].role == "user";
    const size_t context = last_is_query ? n - 1 : n;
    Number(&key, static_cast<uint32_t>(context));
    for (size_t i = 0; i < context; ++i) {
      Field(&key, r.messages[i].role);
      Field(&key, r.messages[i].content);
    }
    *query = last_is_query ? r.messages[n - 1].content : std::string();
  } else {
    *query = r.prompt;
  }
  const SamplingParams& s = r.sampling;
  Number(&key, s.temperature);
  Number(&key, s.top_p);
  Number(&key, s.top_k);
  Number(&key, static_cast<int64_t>(s.seed ? *s.seed : -1));
  Number(&key, s.presence_penalty);
  Number(&key, s.frequency_penalty);
  Number(&key, r.max_tokens);
  Number(&key, static_cast<uint32_t>(r.stop.size()));
  for (const auto& stop : r.stop) Field(&key, stop);
  // The model's name in clear first: readable in stats, and a flush per model can match it.
  *partition = model + ":" + Hex64(XXH3_64bits(key.data(), key.size()));
}

std::string NewEntryId() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return Hex64(rng()) + Hex64(rng());
}

}  // namespace

struct SemanticOutputCache::Metrics {
  explicit Metrics(MetricsRegistry& r)
      : lookups(r.AddCounter("tailcut_semantic_cache_requests_total",
                             "Generation requests by what the semantic output cache did: hit "
                             "(exact or semantic), miss, or bypass (not cacheable)",
                             {"result"})),
        exact(lookups.WithLabels({"exact_hit"})),
        semantic(lookups.WithLabels({"semantic_hit"})),
        miss(lookups.WithLabels({"miss"})),
        bypass(lookups.WithLabels({"bypass"})),
        similarity(r.AddHistogram("tailcut_semantic_cache_hit_similarity",
                                  "Cosine of the query's and the served entry's embeddings, per "
                                  "semantic hit",
                                  {0.8, 0.85, 0.9, 0.925, 0.95, 0.96, 0.97, 0.98, 0.99, 0.995, 1.0})
                       .Get()),
        lookup_seconds(r.AddHistogram("tailcut_semantic_cache_lookup_seconds",
                                      "Time from the request to the cache's decision (embedding "
                                      "included), per lookup, by decision (exact_hit, "
                                      "semantic_hit, miss)",
                                      LatencyBucketsSeconds(), {"result"})),
        lookup_exact(lookup_seconds.WithLabels({"exact_hit"})),
        lookup_semantic(lookup_seconds.WithLabels({"semantic_hit"})),
        lookup_miss(lookup_seconds.WithLabels({"miss"})),
        entries(r.AddGauge("tailcut_semantic_cache_entries", "Answers in the semantic output cache")
                    .Get()),
        bytes(r.AddGauge("tailcut_semantic_cache_bytes", "Bytes the semantic output cache holds")
                  .Get()),
        inserts(r.AddCounter("tailcut_semantic_cache_inserts_total",
                             "Answers stored, by origin: this replica, or another (Redis)",
                             {"origin"})),
        inserted_here(inserts.WithLabels({"local"})),
        adopted_from_replica(inserts.WithLabels({"replica"})) {}
  Family<Counter>& lookups;
  Counter& exact;
  Counter& semantic;
  Counter& miss;
  Counter& bypass;
  Histogram& similarity;
  Family<Histogram>& lookup_seconds;
  Histogram& lookup_exact;
  Histogram& lookup_semantic;
  Histogram& lookup_miss;
  Gauge& entries;
  Gauge& bytes;
  Family<Counter>& inserts;
  Counter& inserted_here;
  Counter& adopted_from_replica;
};

// What one request's lookup carries from step to step.
struct SemanticOutputCache::Lookup {
  GenerateRequest request;
  std::string model;
  GenerationSinkPtr sink;
  GenerateFn generate;
  std::string partition;
  std::string query;
  std::vector<float> embedding;  // Once embedded.
  int64_t start_micros = 0;
  bool read = true;   // Look up (not Cache-Control: no-cache).
  bool write = true;  // Insert the answer (not no-store).
  // The decision's time was observed (once per request: a single-flight follower is a miss
  // that may later replay the leader's answer or generate itself).
  bool timed = false;
};

// Identical queries being generated: the followers replay the leader's answer, or generate
// themselves when it produced none.
class SemanticOutputCache::Flight {
 public:
  int64_t deadline_micros = 0;                     // The leader's; 0 = none.
  std::vector<std::shared_ptr<Lookup>> followers;  // Guarded by flights_mutex_.
};

// Forwards a miss's generation to the client's sink and keeps a copy of the answer, which it
// inserts when the generation completes.
class SemanticOutputCache::RecordingSink final : public GenerationSink {
 public:
  RecordingSink(SemanticOutputCache& cache, std::shared_ptr<Lookup> lookup, std::string flight)
      : cache_(cache), lookup_(std::move(lookup)), flight_(std::move(flight)) {}

  void OnStart(const GenerationStart& start) override {
    entry_.model = start.model;
    entry_.variant = start.variant;
    entry_.prompt_tokens = start.prompt_tokens;
    lookup_->sink->OnStart(start);
  }
  void OnText(const GenerationPiece& piece) override {
    if (keep_) {
      answer_bytes_ += static_cast<int64_t>(piece.text.size());
      if (answer_bytes_ > cache_.options_.max_answer_bytes) {
        keep_ = false;
        entry_.pieces.clear();
      } else {
        entry_.pieces.push_back({piece.text, piece.tokens});
      }
    }
    lookup_->sink->OnText(piece);
  }
  void OnEnd(Result<GenerationEnd> end) override {
    const bool complete =
        end.ok() && !(lookup_->request.cancellation && lookup_->request.cancellation->cancelled());
    if (complete) {
      entry_.finish_reason = end->finish_reason;
      entry_.completion_tokens = end->usage.completion_tokens;
      entry_.prompt_tokens = end->usage.prompt_tokens;
    }
    const bool store = complete && keep_ && lookup_->write;
    SemanticEntryPtr entry;
    if (store) {
      // Stored before the client has its answer, and before the single-flight entry goes: a
      // repeat sent the moment the answer arrives finds it (a hit, never a second generation).
      // An insert is an index update in memory (the Redis publish is asynchronous), cheap
      // next to the step that produced the last token.
      entry_.id = NewEntryId();
      entry_.partition = lookup_->partition;
      entry_.query = lookup_->query;
      entry_.embedding = lookup_->embedding;
      entry_.created_micros = cache_.NowMicros();
      entry = std::make_shared<const SemanticEntry>(std::move(entry_));
      cache_.Insert(entry);
    }
    lookup_->sink->OnEnd(std::move(end));
    std::shared_ptr<Flight> flight = cache_.TakeFlight(flight_);
    if (store) {
      if (flight) {
        SemanticOutputCache& cache = cache_;
        cache.Post([&cache, entry, flight] {
          for (const auto& f : flight->followers) {
            cache.joins_.fetch_add(1, std::memory_order_relaxed);
            cache.Replay(*f, *entry, "exact", 1.0f);
          }
        });
      }
    } else if (flight) {
      // No answer to share: each follower generates (and becomes a leader of its own).
      for (auto& f : flight->followers) {
        cache_.Post([&cache = cache_, f] { cache.Miss(f); });
      }
    }
  }

 private:
  SemanticOutputCache& cache_;
  const std::shared_ptr<Lookup> lookup_;
  const std::string flight_;  // Its single-flight key; empty when it leads none.
  SemanticEntry entry_;
  int64_t answer_bytes_ = 0;
  bool keep_ = true;
};

Result<std::unique_ptr<SemanticOutputCache>> SemanticOutputCache::Create(
    const SemanticCacheOptions& options, Deps deps) {
  double threshold = 0;
  if (options.policy == "verifier") {
    if (!deps.verifier) {
      return Status::InvalidArgument("semantic.policy 'verifier' needs a verifier");
    }
    const double delta = options.max_wrong_hits_per_mille > 0
                             ? static_cast<double>(options.max_wrong_hits_per_mille) / 1000.0
                             : deps.verifier->default_max_wrong_hit_share();
    auto t = deps.verifier->ThresholdFor(delta);
    if (!t.ok()) {
      return Status::InvalidArgument("semantic.max_wrong_hits_per_mille: " + t.status().message());
    }
    threshold = *t;
  } else if (options.policy == "reranker") {
    if (!deps.rerank || !deps.reranker_points) {
      return Status::InvalidArgument("semantic.policy 'reranker' needs a reranker model");
    }
    const double delta = options.max_wrong_hits_per_mille > 0
                             ? static_cast<double>(options.max_wrong_hits_per_mille) / 1000.0
                             : deps.reranker_points->points.default_max_wrong_hit_share();
    auto point = deps.reranker_points->points.For(delta);
    if (!point.ok()) {
      return Status::InvalidArgument("semantic.max_wrong_hits_per_mille: " +
                                     point.status().message());
    }
    threshold = point->threshold;
  } else if (options.policy != "cosine" && options.policy != "exact") {
    return Status::InvalidArgument(
        "semantic.policy must be verifier, reranker, cosine or exact, not '" + options.policy +
        "'");
  }
  if (options.policy != "exact" && !deps.embed) {
    return Status::InvalidArgument("the semantic cache needs an embedding model");
  }
  return std::unique_ptr<SemanticOutputCache>(
      new SemanticOutputCache(options, std::move(deps), threshold));
}

SemanticOutputCache::SemanticOutputCache(const SemanticCacheOptions& options, Deps deps,
                                         double verifier_threshold)
    : options_(options),
      policy_(options.policy == "verifier"   ? Policy::kVerifier
              : options.policy == "reranker" ? Policy::kReranker
              : options.policy == "cosine"   ? Policy::kCosine
                                             : Policy::kExact),
      deps_(std::move(deps)),
      verifier_threshold_(verifier_threshold),
      store_(options.store, deps_.clock ? *deps_.clock : SystemClock::Get()) {
  if (deps_.metrics) {
    metrics_ = std::make_unique<Metrics>(*deps_.metrics);
    deps_.metrics->AddCollectHook([this, entries = &metrics_->entries, bytes = &metrics_->bytes] {
      const auto s = store_.stats();
      entries->Set(static_cast<double>(s.entries));
      bytes->Set(static_cast<double>(s.bytes));
    });
  }
}

SemanticOutputCache::~SemanticOutputCache() = default;

int64_t SemanticOutputCache::NowMicros() const {
  return (deps_.clock ? *deps_.clock : SystemClock::Get()).NowMicros();
}

void SemanticOutputCache::Post(std::function<void()> task) const {
  if (deps_.post) {
    deps_.post(std::move(task));
  } else {
    task();
  }
}

void SemanticOutputCache::Generate(GenerateRequest request, const std::string& model,
                                   GenerationSinkPtr sink, GenerateFn generate) {
  const SamplingParams& s = request.sampling;
  const bool samples = s.temperature > 0 && !s.seed;
  if (!options_.enabled || request.logprobs || (samples && !options_.cache_sampling_requests) ||
      (!request.cache_read && !request.cache_write)) {
    bypasses_.fetch_add(1, std::memory_order_relaxed);
    if (metrics_) metrics_->bypass.Inc();
    return generate(std::move(request), std::move(sink));
  }
  auto lookup = std::make_shared<Lookup>();
  lookup->start_micros = NowMicros();
  lookup->read = request.cache_read;
  lookup->write = request.cache_write;
  SplitRequest(request, model, &lookup->partition, &lookup->query);
  lookup->request = std::move(request);
  lookup->model = model;
  lookup->sink = std::move(sink);
  lookup->generate = std::move(generate);

  if (lookup->read) {
    if (SemanticEntryPtr hit = store_.FindExact(lookup->partition, lookup->query)) {
      exact_hits_.fetch_add(1, std::memory_order_relaxed);
      if (metrics_) metrics_->exact.Inc();
      return Replay(*lookup, *hit, "exact", 1.0f);
    }
  }
  if (policy_ == Policy::kExact) return Miss(std::move(lookup));
  const GenerateRequest& r = lookup->request;
  deps_.embed(r, lookup->query, [this, lookup](Result<std::vector<float>> embedding) mutable {
    // On a batch worker: the decision is microseconds, the rest goes to the work pool.
    AfterEmbedding(std::move(lookup), std::move(embedding));
  });
}

void SemanticOutputCache::AfterEmbedding(std::shared_ptr<Lookup> lookup,
                                         Result<std::vector<float>> embedding) {
  if (!embedding.ok()) return Post([this, lookup] { Miss(lookup); });
  lookup->embedding = std::move(embedding).value();
  if (lookup->read) {
    // The reranker's operating points were measured with its document's floor.
    const float floor = policy_ == Policy::kReranker
                            ? static_cast<float>(deps_.reranker_points->min_cosine)
                            : static_cast<float>(options_.min_cosine_per_mille) / 1000.0f;
    auto candidates =
        store_.Search(lookup->partition, lookup->embedding, options_.candidates, floor);
    if (policy_ == Policy::kReranker) {
      if (candidates.empty()) return Post([this, lookup] { Miss(lookup); });
      // Most similar first: the reranker reads the nearest few only.
      if (candidates.size() > static_cast<size_t>(options_.reranker_candidates)) {
        candidates.resize(static_cast<size_t>(std::max(1, options_.reranker_candidates)));
      }
      return Rerank(std::move(lookup), std::move(candidates));
    }
    const SemanticEntry* best = nullptr;
    float best_cosine = 0;
    double best_score = -1;
    for (const auto& c : candidates) {
      double score = c.cosine;
      if (policy_ == Policy::kVerifier) {
        score = deps_.verifier->Probability(
            ExtractSemanticPairFeatures(lookup->query, c.entry->query, c.cosine));
        if (score < verifier_threshold_) continue;
      }
      if (score > best_score) {
        best = c.entry.get();
        best_score = score;
        best_cosine = c.cosine;
      }
    }
    if (best) return SemanticHit(std::move(lookup), std::move(candidates), best, best_cosine);
  }
  Post([this, lookup] { Miss(lookup); });
}

void SemanticOutputCache::SemanticHit(std::shared_ptr<Lookup> lookup,
                                      std::vector<SemanticCandidate> candidates,
                                      const SemanticEntry* best, float cosine) {
  semantic_hits_.fetch_add(1, std::memory_order_relaxed);
  if (metrics_) {
    metrics_->semantic.Inc();
    metrics_->similarity.Observe(cosine);
  }
  // The candidates hold their entries alive while the replay runs.
  auto hold = std::make_shared<std::vector<SemanticCandidate>>(std::move(candidates));
  Post([this, lookup, hold, best, cosine] { Replay(*lookup, *best, "semantic", cosine); });
}

void SemanticOutputCache::Rerank(std::shared_ptr<Lookup> lookup,
                                 std::vector<SemanticCandidate> candidates) {
  std::vector<std::string> cached;
  cached.reserve(candidates.size());
  for (const auto& c : candidates) cached.push_back(c.entry->query);
  // The candidates (and so their entries) live in the callback until the decision is made.
  auto held = std::make_shared<std::vector<SemanticCandidate>>(std::move(candidates));
  const GenerateRequest& r = lookup->request;
  deps_.rerank(r, lookup->query, std::move(cached),
               [this, lookup, held](Result<std::vector<float>> logits) mutable {
                 AfterRerank(std::move(lookup), std::move(*held), std::move(logits));
               });
}

void SemanticOutputCache::AfterRerank(std::shared_ptr<Lookup> lookup,
                                      std::vector<SemanticCandidate> candidates,
                                      Result<std::vector<float>> logits) {
  // Like the embedding: a failure (overload, deadline) is a miss, never the request's error.
  if (!logits.ok() || logits->size() != candidates.size()) {
    return Post([this, lookup] { Miss(lookup); });
  }
  const SemanticEntry* best = nullptr;
  float best_cosine = 0;
  double best_probability = -1;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const double probability = ProbabilityOfLogit((*logits)[i]);
    if (probability < verifier_threshold_ || probability <= best_probability) continue;
    best = candidates[i].entry.get();
    best_probability = probability;
    best_cosine = candidates[i].cosine;
  }
  if (!best) return Post([this, lookup] { Miss(lookup); });
  SemanticHit(std::move(lookup), std::move(candidates), best, best_cosine);
}

std::shared_ptr<SemanticOutputCache::Flight> SemanticOutputCache::TakeFlight(
    const std::string& key) {
  if (key.empty()) return nullptr;
  std::lock_guard<std::mutex> lock(flights_mutex_);
  auto it = flights_.find(key);
  if (it == flights_.end()) return nullptr;
  auto flight = std::move(it->second);
  flights_.erase(it);
  return flight;
}

void SemanticOutputCache::Miss(std::shared_ptr<Lookup> lookup) {
  if (metrics_ && !lookup->timed) {
    lookup->timed = true;
    metrics_->lookup_miss.Observe(static_cast<double>(NowMicros() - lookup->start_micros) / 1e6);
  }
  std::string flight_key;
  if (lookup->write) {
    // Single-flight: the first identical query generates, the others wait for its answer.
    flight_key = lookup->partition + '\n' + lookup->query;
    const int64_t deadline = lookup->request.deadline_micros;
    std::lock_guard<std::mutex> lock(flights_mutex_);
    auto [it, leader] = flights_.try_emplace(flight_key);
    if (!leader) {
      const int64_t leader_deadline = it->second->deadline_micros;
      if (deadline == 0 || (leader_deadline != 0 && deadline >= leader_deadline)) {
        it->second->followers.push_back(std::move(lookup));
        return;
      }
      flight_key.clear();  // It cannot wait that long: it generates, and leads nothing.
    } else {
      it->second = std::make_shared<Flight>();
      it->second->deadline_micros = deadline;
    }
  }
  misses_.fetch_add(1, std::memory_order_relaxed);
  if (metrics_) metrics_->miss.Inc();
  auto sink = std::make_shared<RecordingSink>(*this, lookup, std::move(flight_key));
  GenerateRequest request = lookup->request;  // The lookup keeps its copy for the key.
  lookup->generate(std::move(request), std::move(sink));
}

void SemanticOutputCache::Replay(const Lookup& lookup, const SemanticEntry& entry,
                                 const std::string& kind, float similarity) {
  const int64_t now = NowMicros();
  if (metrics_ && !lookup.timed) {
    Histogram& h = kind == "exact" ? metrics_->lookup_exact : metrics_->lookup_semantic;
    h.Observe(static_cast<double>(now - lookup.start_micros) / 1e6);
  }
  GenerationStart start;
  start.model = entry.model;
  start.variant = entry.variant;
  start.prompt_tokens = entry.prompt_tokens;
  start.queue_micros = now - lookup.start_micros;
  start.cache = kind;
  start.cache_similarity = similarity;
  start.cache_age_millis = (now - entry.created_micros) / 1000;
  GenerationSink& sink = *lookup.sink;
  sink.OnStart(start);
  for (const auto& piece : entry.pieces) {
    GenerationPiece p;
    p.text = piece.text;
    p.tokens = piece.tokens;
    sink.OnText(p);
  }
  GenerationEnd end;
  end.model = entry.model;
  end.variant = entry.variant;
  end.finish_reason = entry.finish_reason;
  end.usage.prompt_tokens = entry.prompt_tokens;
  end.usage.completion_tokens = entry.completion_tokens;
  end.timings = lookup.request.timings;
  end.timings.queue_micros = start.queue_micros;
  sink.OnEnd(std::move(end));
}

void SemanticOutputCache::Insert(const SemanticEntryPtr& entry) {
  if (!store_.Insert(entry)) return;
  inserts_.fetch_add(1, std::memory_order_relaxed);
  if (metrics_) metrics_->inserted_here.Inc();
  if (deps_.publish) {
    // Encoding for Redis is the work pool's, not the caller's (often the step loop).
    Post([this, entry] { deps_.publish(*entry); });
  }
}

bool SemanticOutputCache::Adopt(SemanticEntry entry) {
  if (store_.Contains(entry.id)) return false;
  if (!store_.Insert(std::move(entry))) return false;
  adopted_.fetch_add(1, std::memory_order_relaxed);
  if (metrics_) metrics_->adopted_from_replica.Inc();
  return true;
}

int64_t SemanticOutputCache::Flush() {
  return store_.Clear();
}

SemanticCacheStats SemanticOutputCache::stats() const {
  SemanticCacheStats s;
  s.exact_hits = exact_hits_.load(std::memory_order_relaxed);
  s.semantic_hits = semantic_hits_.load(std::memory_order_relaxed);
  s.misses = misses_.load(std::memory_order_relaxed);
  s.bypasses = bypasses_.load(std::memory_order_relaxed);
  s.inserts = inserts_.load(std::memory_order_relaxed);
  s.adopted = adopted_.load(std::memory_order_relaxed);
  s.single_flight_joins = joins_.load(std::memory_order_relaxed);
  s.store = store_.stats();
  return s;
}

Result<std::string> SemanticEmbeddingVariant(const SemanticCacheOptions& options,
                                             const std::string& measured_on,
                                             const ModelConfig& model) {
  std::string names;
  auto has = [&](const std::string& name) {
    for (const VariantConfig& v : model.variants) {
      if (v.name == name) return true;
    }
    return false;
  };
  for (const VariantConfig& v : model.variants) names += (names.empty() ? "" : ", ") + v.name;
  std::string fallback = model.default_variant;
  if (fallback.empty() && !model.variants.empty()) fallback = model.variants.front().name;
  if (!options.embedding_variant.empty()) {
    if (has(options.embedding_variant)) return options.embedding_variant;
    return Status::InvalidArgument("semantic.embedding_variant '" + options.embedding_variant +
                                   "' is not a variant of model '" + model.name + "' (it has " +
                                   (names.empty() ? std::string("none") : names) + ")");
  }
  if (!measured_on.empty()) {
    if (has(measured_on)) return measured_on;
    spdlog::warn(
        "semantic output cache: the {} policy was measured on variant '{}', which model '{}' "
        "lacks; queries use '{}' and its wrong-hit bounds may not hold there",
        options.policy, measured_on, model.name, fallback);
  }
  return fallback;
}

}  // namespace tailcut
