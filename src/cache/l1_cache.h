// L1Cache: the in-process tier of the embedding cache. It maps a CacheKey (a digest of model,
// weights, options and token ids) to the embedding the model computed for it, so a repeated
// input skips tokenizer-to-output inference entirely.
//
// Design (why each part is there):
//  - Byte capacity. Entries are charged their float payload plus a fixed per-entry overhead
//    (the entry header, allocator rounding and the hash-map node; see ChargeBytes), so the cap
//    bounds real heap use, not an entry count that means different memory per model.
//  - Lock striping. Keys are spread over `shards` independent shards, each with its own mutex,
//    hash map, lists and frequency sketch; operations on different shards never contend. Each
//    shard gets capacity_bytes / shards.
//  - W-TinyLFU admission (Caffeine's design). A new entry enters a small LRU "window"
//    (window_fraction of the shard); entries leaving it become candidates for the main space,
//    a segmented LRU (probation ~20%, protected ~80%). A candidate is admitted only if the
//    frequency sketch says it is more popular than the main space's eviction victim, so a
//    scan of one-hit wonders cycles through the window and never displaces the hot set (a
//    plain LRU or SLRU would be flushed by it). The window keeps recency-biased bursts
//    cacheable. admission_filter=false turns this into a plain segmented LRU.
//  - TTL (expire after write). Expired entries are never returned; they are dropped lazily
//    on lookup and, because with one TTL write order is expiry order, from the head of a
//    per-shard write-order queue on every insert (bounded work per call).
//  - O(1) operations: intrusive doubly-linked lists and a hash map of entry pointers; an
//    entry header and its payload are one allocation, made (and freed) outside the lock.
//  - Statistics are plain per-shard counters updated under the shard lock the operation
//    holds anyway; stats() sums them and, when a MetricsRegistry is given, a collect hook
//    publishes them at scrape time. The hot path thus touches no shared atomic at all (a
//    shared hit counter would be one contended cache line for every lookup on every core).
//
// Thread-safety: every method is safe to call concurrently from any thread. Operations lock
// one shard; stats(), Clear() and EraseTag() lock the shards one after another, so their view
// across shards is not one atomic snapshot.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "cache/cache_key.h"
#include "common/clock.h"
#include "obs/metrics.h"

namespace tailcut {

struct L1CacheOptions {
  // Total bytes the cache may hold, counted as payload + a fixed per-entry overhead
  // (ChargeBytes). Fixed structures come on top: the frequency sketch and the hash-map
  // buckets, about 16 bytes per expected entry (~1% at 384-dim float vectors). Size it from
  // the memory you can spare; hit rate grows roughly with the log of it on Zipf-like traffic.
  size_t capacity_bytes = 256u << 20;
  // Time an entry stays valid after it was written, 0 = no expiry. It bounds how stale a
  // vector can be if keys ever fail to capture a change; keys include the weights' digest, so
  // this is a memory-hygiene bound more than a correctness one.
  int64_t ttl_micros = 3600ll * 1000000;
  // Lock stripes. More shards = less contention but each shard gets capacity/shards, and an
  // entry larger than one shard's capacity is refused. ~4x the number of serving threads.
  int shards = 16;
  // Share of each shard's capacity given to the W-TinyLFU admission window (recency). Raise it
  // (e.g. 0.1-0.2) for bursty, recency-driven traffic; keep it small for frequency-driven
  // (Zipf) traffic. Caffeine's default is 0.01. Ignored when admission_filter is false.
  double window_fraction = 0.01;
  // true = W-TinyLFU (window + frequency-filtered admission into a segmented LRU);
  // false = plain segmented LRU with no admission filter (for comparison).
  bool admission_filter = true;
  // Typical value size in floats. Only sizes the frequency sketch and the hash-map reserve
  // (expected entries = capacity / ChargeBytes(expected_value_floats)); a poor guess costs a
  // little memory or slightly noisier admission, never correctness.
  size_t expected_value_floats = 384;
};

class L1Cache {
 public:
  struct Stats {
    uint64_t hits = 0;
    uint64_t misses = 0;  // Includes lookups that found an expired entry.
    // Values stored (Insert returned true), overwrites included.
    uint64_t inserts = 0;
    // Values the admission policy dropped: refused at Insert (larger than a shard), or
    // admission-window candidates that lost to the main space's victim (possibly in the
    // same Insert call, which then returns false).
    uint64_t rejected_by_admission = 0;
    uint64_t evictions = 0;    // Main-space entries evicted for capacity.
    uint64_t expirations = 0;  // Entries dropped because their TTL passed.
    uint64_t flushed = 0;      // Entries removed by EraseTag() or Clear().
    size_t bytes = 0;          // Charged bytes of resident entries.
    size_t entries = 0;
  };

  // `clock` must outlive the cache. `metrics` may be null; if given it must outlive the cache
  // or the cache must be destroyed before the registry serialises again (the collect hook
  // detaches itself on destruction). Declares the tailcut_cache_* families with tier="l1",
  // so create one L1Cache per registry.
  L1Cache(const L1CacheOptions& options, const Clock& clock, MetricsRegistry* metrics);
  ~L1Cache();
  L1Cache(const L1Cache&) = delete;
  L1Cache& operator=(const L1Cache&) = delete;

  // Copies the value into *out (reusing its capacity; may be null to only probe) if present
  // and not expired. O(1). A hit refreshes recency and frequency.
  bool Lookup(const CacheKey& key, std::vector<float>* out);
  // Lookup() again for a key whose Lookup() this caller has just counted as a miss (a second
  // look before computing it): a hit counts and refreshes as Lookup()'s does (the first
  // look's miss stays counted: counters only grow), a miss is not counted twice.
  bool LookupAgain(const CacheKey& key, std::vector<float>* out);
  // Stores `value` under `key`, tagged with `tag` (the owning model's small id, for
  // EraseTag). Overwrites an existing entry (and restarts its TTL). Returns false if the value
  // is not resident afterwards: too large for a shard, or rejected by admission. O(1)
  // amortised (each entry is evicted at most once).
  bool Insert(const CacheKey& key, uint32_t tag, std::span<const float> value);
  // Whether a live entry exists. No side effects on stats, recency or frequency (warm-up).
  bool Contains(const CacheKey& key) const;
  // Remaining TTL of a live entry in micros; INT64_MAX when ttl_micros is 0; nullopt if
  // absent or expired. No side effects.
  std::optional<int64_t> RemainingTtlMicros(const CacheKey& key) const;
  // Removes every entry tagged `tag` (a model unloaded or reloaded); returns how many.
  // O(entries): walks every shard.
  size_t EraseTag(uint32_t tag);
  // Removes every entry. Frequency history is kept (it is about keys, not values).
  void Clear();

  Stats stats() const;
  const L1CacheOptions& options() const { return options_; }

  // Bytes charged for an entry of `floats` values: the payload plus the measured fixed
  // overhead (entry header, allocator rounding, hash-map node and bucket share).
  static size_t ChargeBytes(size_t floats);

 private:
  struct Shard;        // One lock stripe; defined in l1_cache.cc.
  struct MetricsHook;  // State shared with the registry's collect hook.

  Shard& ShardFor(uint64_t hash) const;
  bool Find(const CacheKey& key, std::vector<float>* out, bool count_miss);
  int64_t Now() const { return options_.ttl_micros > 0 ? clock_.NowMicros() : 0; }

  const L1CacheOptions options_;
  const Clock& clock_;
  const size_t shard_count_;
  std::unique_ptr<Shard[]> shards_;
  std::shared_ptr<MetricsHook> metrics_hook_;  // Shared with the registry's collect hook.
};

}  // namespace tailcut
