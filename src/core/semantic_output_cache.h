// SemanticOutputCache: generated answers reused for requests that ask the same thing, looked up
// before a generation request is queued (Triton's order: cache first, queue second).
//
// For each generation request:
//   1. Eligibility. Only what may be reused is: by default deterministic requests (temperature
//      0, or an explicit seed); a request that samples bypasses the cache unless
//      `cache_sampling_requests` opts in. Requests asking for logprobs bypass it (a cached
//      answer's log-probabilities are another prompt's). Cache-Control: no-cache skips the
//      lookup, no-store the insert.
//   2. Partition: everything that must match exactly for one request's answer to serve another
//      is hashed into the partition key: the model, the precision pin, completions vs chat,
//      the system prompt and every earlier turn (roles and texts), the sampling parameters,
//      max_tokens and the stop strings. Only the query text (the last user turn, or the
//      completion prompt) may differ, and only by meaning.
//   3. Exact match: the same query text in the partition is a hit ("exact").
//   4. Semantic match: the query is embedded with the configured embedding model through the
//      core (in process, through its batching and embedding cache, so a burst of lookups is one
//      batch), the partition's nearest entries are found (SemanticStore, HNSW), and the decision
//      policy accepts the best candidate or none: a cosine threshold, a verifier trained on
//      labelled question pairs whose probability threshold is chosen for the operator's bound
//      on wrong hits (SemanticVerifier, max_wrong_hits_per_mille), or a reranker (a
//      cross-encoder model that reads both texts, scoring the candidates through its own batch
//      queue; its threshold from its measured operating points, SemanticRerankerDocument).
//   5. A hit is replayed into the sink as the original generation's pieces (streamed when the
//      request streams), with GenerationStart::cache saying so; a miss generates as usual, and
//      its answer is inserted when it completes (stop or length), never when it was cancelled
//      or failed.
// An embedding or reranking failure (model not loaded, overload, deadline) degrades to a miss:
// the cache never fails a request that generation could answer. Identical concurrent queries (same
// partition, same text) generate once: the others wait for that answer (single-flight), or
// generate themselves if it fails. Only a request whose deadline is no earlier than the
// generating one's waits for it (that generation ends by its own deadline, so the wait is
// bounded by the waiter's); one with an earlier deadline generates on its own.
//
// Replicas: every insert is offered to `publish` (the Redis log, core/semantic_cache_sync.h),
// and entries other replicas computed come in through Adopt().
//
// Thread-safety: every method is safe from any thread. Callbacks (embedding, continuation,
// sinks) run on the threads the core hands them to; none is called with a lock held.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "cache/semantic_operating_points.h"
#include "cache/semantic_store.h"
#include "cache/semantic_verifier.h"
#include "common/clock.h"
#include "common/status.h"
#include "core/generation.h"
#include "engine/model_config.h"
#include "obs/metrics.h"

namespace tailcut {

struct SemanticCacheOptions {
  // Whether generation requests look in (and fill) the cache at all.
  bool enabled = false;
  // How a candidate is judged the same question: "verifier" (the trained pair classifier, at
  // the threshold that max_wrong_hits_per_mille asks for), "reranker" (a cross-encoder reads
  // both texts: the reranker model scores the nearest candidates, at the threshold its
  // operating points give for max_wrong_hits_per_mille; fewer wrong hits than the verifier
  // from a 10 % hit rate up, for one model pass per lookup, 4-5 ms at the median on 2 cores),
  // "cosine" (one cosine threshold, min_cosine_per_mille), or "exact" (identical query text
  // only; nothing is embedded).
  std::string policy = "verifier";
  // The reranker policy's model (kind: reranker); empty = the repository's first reranker.
  // Its folder must hold semantic_operating_points.json (tools/calibrate_cross_encoder.py),
  // whose variants (reranker and embedding) and cosine floor the policy uses.
  std::string reranker_model;
  // The text-embedding model that embeds queries; empty = the default text-embedding model.
  // The verifier was trained on all-MiniLM-L6-v2's vectors: with another model its
  // operating points no longer hold (use the cosine policy, measured for that model).
  std::string embedding_model;
  // The precision variant of that model that embeds queries (and so every cached prompt: one
  // vector space for the whole cache, whatever the precision controller does to other
  // traffic). Empty = the variant the verifier's document was measured on (its
  // embedding_variant) under the verifier policy, else the model's default variant. A faster
  // variant makes a lookup cheaper (a hit's latency is mostly this embedding); the verifier's
  // operating points hold only in the vector space it was measured in.
  std::string embedding_variant;
  // The verifier policy's bound on wrong hits, in hits per thousand: the operating point (of the
  // verifier's measured table) with the most hits whose wrong-hit share on held-out labelled
  // pairs is at most this. Lower = fewer wrong answers and fewer hits. 0 = the verifier's own
  // recommended bound (its document's default_max_wrong_hit_share).
  int64_t max_wrong_hits_per_mille = 0;
  // Cosine policy: the threshold. Verifier policy: candidates below it are not even scored (a
  // floor that saves work; the verifier's table says how many true hits lie below it). The
  // reranker policy uses its document's floor instead (its points were measured with it).
  int64_t min_cosine_per_mille = 900;
  // Nearest entries scored per lookup. More finds a paraphrase the embedding ranks second, at
  // a few microseconds each.
  int candidates = 4;
  // Reranker policy: of those, the nearest this many are scored by the reranker, in one batch.
  // Each is a pair through the model (3-4 ms apiece for question-sized pairs on one core of
  // the machines measured, INT8), so the default scores only the nearest, which is also what
  // its operating points were measured on (one cached question per lookup).
  int reranker_candidates = 1;
  // Cache requests that sample (temperature > 0 without a seed). Off by default: their answers
  // are meant to differ from run to run.
  bool cache_sampling_requests = false;
  // Longest generated answer stored, in bytes of text; longer ones are not cached.
  int64_t max_answer_bytes = 64 << 10;
  SemanticStoreOptions store;
};

struct SemanticCacheStats {
  int64_t exact_hits = 0;
  int64_t semantic_hits = 0;
  int64_t misses = 0;
  int64_t bypasses = 0;
  int64_t inserts = 0;
  int64_t adopted = 0;  // Entries received from other replicas.
  int64_t single_flight_joins = 0;
  SemanticStoreStats store;
};

class SemanticOutputCache {
 public:
  // Embeds one query: calls `done` once, on any thread, with the L2-normalised vector or why
  // not. `request` carries the generation request's deadline and cancellation.
  using EmbedFn = std::function<void(const GenerateRequest& request, const std::string& text,
                                     std::function<void(Result<std::vector<float>>)> done)>;
  // Queues the request on the model (the path a request takes without the cache).
  using GenerateFn = std::function<void(GenerateRequest request, GenerationSinkPtr sink)>;
  // Runs a continuation off the calling thread (the work pool): an embedding's callback
  // arrives on a batch worker, which must not tokenise prompts or replay answers.
  using PostFn = std::function<void(std::function<void()>)>;
  // Offered every entry this replica inserts (the Redis log); may be null.
  using PublishFn = std::function<void(const SemanticEntry& entry)>;
  // Scores the query against each cached prompt with the reranker: calls `done` once, on any
  // thread, with one logit per prompt (in order) or why not.
  using RerankFn = std::function<void(const GenerateRequest& request, const std::string& query,
                                      std::vector<std::string> cached,
                                      std::function<void(Result<std::vector<float>>)> done)>;

  struct Deps {
    EmbedFn embed;
    PostFn post;        // Null = run continuations inline.
    PublishFn publish;  // Null = this replica alone.
    // The verifier policy's classifier; null with another policy.
    std::shared_ptr<const SemanticVerifier> verifier;
    // The reranker policy's scorer and operating points; null with another policy.
    RerankFn rerank;
    std::shared_ptr<const SemanticRerankerDocument> reranker_points;
    MetricsRegistry* metrics = nullptr;  // May be null.
    const Clock* clock = nullptr;        // Null = SystemClock.
  };

  // kInvalidArgument when the options are inconsistent (an unknown policy, the verifier policy
  // without a verifier, a bound the verifier has no operating point for: the message names the
  // range it has).
  static Result<std::unique_ptr<SemanticOutputCache>> Create(const SemanticCacheOptions& options,
                                                             Deps deps);
  ~SemanticOutputCache();

  // Answers `request` (whose model is canonical: `model`) from the cache when it may and can,
  // else generates it with `generate` and caches the answer.
  void Generate(GenerateRequest request, const std::string& model, GenerationSinkPtr sink,
                GenerateFn generate);
  // An entry another replica computed (from the Redis log). False if already known.
  bool Adopt(SemanticEntry entry);
  // Removes every entry; the count removed.
  int64_t Flush();
  SemanticCacheStats stats() const;
  const SemanticCacheOptions& options() const { return options_; }
  // The verifier's or the reranker's probability threshold in force (0 with another policy).
  double verifier_threshold() const { return verifier_threshold_; }

 private:
  struct Lookup;
  struct Metrics;
  class RecordingSink;
  class Flight;

  SemanticOutputCache(const SemanticCacheOptions& options, Deps deps, double verifier_threshold);
  void AfterEmbedding(std::shared_ptr<Lookup> lookup, Result<std::vector<float>> embedding);
  // Scores the candidates with the reranker, then hits or misses.
  void Rerank(std::shared_ptr<Lookup> lookup, std::vector<SemanticCandidate> candidates);
  // The reranker's logits for `candidates` (in order): the best at or above the threshold
  // hits, else a miss. On the reranker's batch worker, like AfterEmbedding.
  void AfterRerank(std::shared_ptr<Lookup> lookup, std::vector<SemanticCandidate> candidates,
                   Result<std::vector<float>> logits);
  // Counts the hit and replays `best` (one of `candidates`) on the work pool.
  void SemanticHit(std::shared_ptr<Lookup> lookup, std::vector<SemanticCandidate> candidates,
                   const SemanticEntry* best, float cosine);
  void Replay(const Lookup& lookup, const SemanticEntry& entry, const std::string& kind,
              float similarity);
  void Miss(std::shared_ptr<Lookup> lookup);
  // Removes and returns the single-flight entry `key` (null for none, or an empty key).
  std::shared_ptr<Flight> TakeFlight(const std::string& key);
  // Stores `entry` (shared, not copied) and offers it to the publisher.
  void Insert(const SemanticEntryPtr& entry);
  void Post(std::function<void()> task) const;
  int64_t NowMicros() const;

  const SemanticCacheOptions options_;
  // options_.policy, parsed once by Create() (a lookup tests it, not the string).
  enum class Policy : uint8_t { kVerifier, kReranker, kCosine, kExact };
  const Policy policy_;
  const Deps deps_;
  const double verifier_threshold_;
  SemanticStore store_;
  std::unique_ptr<Metrics> metrics_;

  // Single-flight: the followers of queries being generated, by partition + query.
  std::mutex flights_mutex_;
  std::unordered_map<std::string, std::shared_ptr<Flight>> flights_;

  std::atomic<int64_t> exact_hits_{0}, semantic_hits_{0}, misses_{0}, bypasses_{0}, inserts_{0},
      adopted_{0}, joins_{0};
};

// The variant of `model` that embeds the semantic cache's queries, as
// SemanticCacheOptions::embedding_variant says, else `measured_on` (the variant the decision's
// document was measured in: the verifier's or the reranker's; empty = none), else the model's
// default. kInvalidArgument, naming the model's variants, when the configured one is not among
// them; a document measured on a variant this model lacks gets the default variant and a
// warning (its operating points may not hold there).
Result<std::string> SemanticEmbeddingVariant(const SemanticCacheOptions& options,
                                             const std::string& measured_on,
                                             const ModelConfig& model);

}  // namespace tailcut
