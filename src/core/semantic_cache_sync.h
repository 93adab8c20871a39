// SemanticCacheSync: shares the semantic output cache's entries between replicas through Redis,
// so that a replica that did not compute an answer can serve it.
//
// The shared store is one Redis stream used as an append-only log (XADD with MAXLEN, so Redis
// holds at most about max_log_entries answers): each replica appends every entry it computes
// (Publish), and every replica reads the entries after the last id it has seen, at start-up from
// the beginning and then every poll_millis, and adopts them into its in-process index
// (SemanticOutputCache::Adopt; its own entries come back too and are skipped by id). An entry
// older than the cache's TTL is skipped on reading. A stream, not a key per entry: one round
// trip a poll finds everything new, in insertion order, without a SCAN of the keyspace.
//
// Redis failing is never the service failing: a failed append is dropped (counted), a failed
// read is retried at the next poll (the circuit breaker in RedisClient paces a dead server),
// and the replica keeps serving from its own entries meanwhile.
//
// Lifetime: Stop() before the Redis client is destroyed (no poll starts after it; callbacks
// of reads already sent find it stopped and do nothing); then destroy this, then the cache.
//
// Thread-safety: Publish() and stats() from any thread; Start() and Stop() once each.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "cache/redis_client.h"
#include "cache/semantic_store.h"
#include "common/clock.h"
#include "common/delayed_executor.h"
#include "core/semantic_output_cache.h"

namespace tailcut {

struct SemanticCacheSyncOptions {
  // Share entries through Redis when Redis is configured (redis.enabled); false = each
  // replica keeps its own.
  bool enabled = true;
  // The stream's key (under the Redis client's key prefix).
  std::string stream_key = "semantic-cache:log";
  // About how many entries the stream keeps (older ones are trimmed); bounds Redis's memory
  // and a new replica's start-up read. Match it to what one replica's byte bound holds.
  int64_t max_log_entries = 100'000;
  // How often a replica looks for entries other replicas added: the longest an answer
  // computed elsewhere goes unseen here. One small round trip each when nothing is new.
  int64_t poll_millis = 200;
  // Entries read per round trip.
  int64_t read_batch = 256;
};

struct SemanticCacheSyncStats {
  int64_t published = 0;
  int64_t publish_failures = 0;
  int64_t read = 0;     // Entries read from the log (own ones included).
  int64_t adopted = 0;  // New to this replica.
  int64_t skipped = 0;  // Expired or undecodable.
  int64_t read_failures = 0;
};

// One entry as the log stores it (versioned JSON), and back. nullopt for a value that is not
// a well-formed entry. `clock` is the one created_micros is read on: a process's Clock is
// monotonic and means nothing on another host, so the log carries the creation time as wall
// time (Unix microseconds), converted on the way in and out.
std::string EncodeSemanticEntry(const SemanticEntry& entry, const Clock& clock);
std::optional<SemanticEntry> DecodeSemanticEntry(std::string_view value, const Clock& clock);

class SemanticCacheSync {
 public:
  // `redis`, `cache` and `post` (the work pool, where adopting runs: an HNSW insert per entry
  // is too much for the Redis client's thread) must outlive this.
  SemanticCacheSync(const SemanticCacheSyncOptions& options, RedisClient& redis,
                    SemanticOutputCache& cache, SemanticOutputCache::PostFn post,
                    int64_t ttl_micros, const Clock& clock);
  ~SemanticCacheSync();  // Stop().

  // Reads the log from its start, then polls.
  void Start();
  void Stop();
  // Appends `entry` to the log (fire and forget).
  void Publish(const SemanticEntry& entry);
  // Deletes the shared log (an admin flush); done(count of keys removed).
  void DeleteLog(std::function<void(Result<int64_t>)> done);
  SemanticCacheSyncStats stats() const;

 private:
  void Poll();
  void Schedule(int64_t delay_micros);

  const SemanticCacheSyncOptions options_;
  RedisClient& redis_;
  SemanticOutputCache& cache_;
  const SemanticOutputCache::PostFn post_;
  const int64_t ttl_micros_;
  const Clock& clock_;
  std::atomic<bool> stopped_{false};
  std::mutex mutex_;
  std::string last_id_ = "0-0";  // Guarded by mutex_.
  std::atomic<int64_t> published_{0}, publish_failures_{0}, read_{0}, adopted_{0}, skipped_{0},
      read_failures_{0};
  std::unique_ptr<DelayedExecutor> timer_;  // Last: its thread runs Poll() on the members.
};

}  // namespace tailcut
