// SemanticStore: the in-process tier of the semantic output cache (core/semantic_output_cache.h):
// generated answers, each under the prompt text and prompt embedding that produced it, found
// again by exact text or by nearest embeddings. Entries live in partitions (everything that must
// match exactly between two requests for one's answer to serve the other: model, sampling
// parameters, system prompt and earlier turns; the caller hashes them into a string), and each
// partition has its own approximate-nearest-neighbour index (hnswlib's HNSW over inner products
// of L2-normalised vectors, so a distance is 1 - cosine), so a search never crosses a partition.
//
// Bounds: a TTL (an entry past it is never returned and is removed when met) and a byte bound
// over every partition (least recently used entries go first; a hit refreshes). What the store
// evicts it also deletes from the index (hnswlib's markDelete), and the slot is reused by the
// next insert into that partition, so an index never grows past the most entries it has held
// at once.
//
// Thread-safety: every method is safe from any thread (one mutex; a search of a partition of
// n entries costs O(log n) distance computations under it, microseconds at the sizes a byte
// bound allows).
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/clock.h"

namespace tailcut {

// One cached answer, as a generation produced it: replayed piece by piece, so a streamed hit
// streams as the original did.
struct CachedAnswerPiece {
  std::string text;
  int32_t tokens = 1;
};

struct SemanticEntry {
  std::string id;                // Unique across replicas (the Redis log carries it).
  std::string partition;         // As given to Insert.
  std::string query;             // The text that was embedded (the last user turn, or the prompt).
  std::vector<float> embedding;  // L2-normalised; every entry of a store has the same size.
  std::string model;
  std::string variant;
  std::vector<CachedAnswerPiece> pieces;
  std::string finish_reason;
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  int64_t created_micros = 0;  // SystemClock, when the answer was complete.

  // What the entry is charged against SemanticStoreOptions::capacity_bytes.
  size_t Bytes() const;
};
using SemanticEntryPtr = std::shared_ptr<const SemanticEntry>;

struct SemanticStoreOptions {
  // Bytes all entries may hold (texts, pieces, embedding, and the index's share); beyond it the
  // least recently used entries are evicted. 64 MiB holds ~30,000 answers of a few hundred
  // tokens with 384-dimensional embeddings.
  int64_t capacity_bytes = 64 << 20;
  // An entry older than this is never served; 0 = no expiry. Bounds how long a stale answer
  // (of a model file since replaced) can be served.
  int64_t ttl_micros = 3'600'000'000;
  // HNSW graph degree and the candidate list sizes at insert and search. Larger = better recall
  // at more CPU per call; the defaults find the true nearest neighbour almost always at the
  // partition sizes a byte bound allows.
  int hnsw_m = 16;
  int hnsw_ef_construction = 100;
  int hnsw_ef_search = 64;
};

struct SemanticCandidate {
  SemanticEntryPtr entry;
  float cosine = 0;  // Of the query's embedding and the entry's.
};

struct SemanticStoreStats {
  int64_t entries = 0;
  int64_t bytes = 0;
  int64_t partitions = 0;
  int64_t index_slots = 0;  // Points the partitions' indexes hold, live or freed for reuse.
  int64_t evicted = 0;      // For the byte bound.
  int64_t expired = 0;      // Removed past their TTL.
};

class SemanticStore {
 public:
  SemanticStore(const SemanticStoreOptions& options, const Clock& clock);
  ~SemanticStore();
  SemanticStore(const SemanticStore&) = delete;
  SemanticStore& operator=(const SemanticStore&) = delete;

  // Adds `entry` (its embedding's size must match the store's first embedded entry's; false
  // when it does not, when its id is already stored, or when it alone exceeds the byte bound).
  // An entry without an embedding (the exact policy embeds nothing) is found by FindExact
  // only. An entry with the same partition and query as a stored one replaces it. The store
  // shares `entry` (no copy): the caller may go on reading it.
  bool Insert(SemanticEntryPtr entry);
  bool Insert(SemanticEntry entry) {
    return Insert(std::make_shared<const SemanticEntry>(std::move(entry)));
  }
  // The entry of `partition` whose query is exactly `query`, if live; refreshes its recency.
  SemanticEntryPtr FindExact(const std::string& partition, const std::string& query);
  // Up to `k` live entries of `partition` nearest to `embedding`, most similar first, each with
  // cosine >= min_cosine; refreshes the recency of the first.
  std::vector<SemanticCandidate> Search(const std::string& partition,
                                        const std::vector<float>& embedding, int k,
                                        float min_cosine);
  // Whether an entry with this id is stored (expired or not).
  bool Contains(const std::string& id) const;
  // Removes every entry; the count removed.
  int64_t Clear();
  SemanticStoreStats stats() const;

 private:
  struct Partition;
  struct Slot;
  using Lru = std::list<Slot*>;

  void RemoveLocked(Slot* slot);
  bool ExpiredLocked(const SemanticEntry& entry, int64_t now) const;

  const SemanticStoreOptions options_;
  const Clock& clock_;
  mutable std::mutex mutex_;
  size_t dimensions_ = 0;  // From the first insert.
  std::map<std::string, std::unique_ptr<Partition>> partitions_;
  std::unordered_map<std::string, Slot*> by_id_;
  Lru lru_;  // Most recently used first.
  int64_t bytes_ = 0;
  int64_t evicted_ = 0;
  int64_t expired_ = 0;
};

}  // namespace tailcut
