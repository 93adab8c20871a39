// SingleFlight: makes identical concurrent misses in one process share one computation. The
// first miss of a key becomes its leader and computes; misses of the same key arriving
// before the leader finishes wait and receive the leader's row. (Across processes the same
// job is done by a Redis lock; see core/embedding_cache.h.)
//
// Thread-safety: all methods are safe from any thread. Waiters run on the thread that calls
// Complete(), outside any lock.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "cache/cache_key.h"
#include "common/status.h"

namespace tailcut {

class SingleFlight {
 public:
  // Receives the leader's row, or its failure (the waiter then decides whether to retry).
  using Waiter = std::function<void(const Status& status, std::span<const float> row)>;

  explicit SingleFlight(size_t shards = 16);

  // True: no computation of `key` was in flight; the caller leads and must call Complete().
  // False: `waiter` was registered and will be called when the leader completes.
  bool JoinOrLead(const CacheKey& key, Waiter waiter);
  // Ends the flight of `key`, calling every waiter with the outcome.
  void Complete(const CacheKey& key, const Status& status, std::span<const float> row);

  size_t in_flight() const;

 private:
  struct Shard {
    mutable std::mutex mutex;
    std::unordered_map<CacheKey, std::vector<Waiter>, CacheKeyHash> flights;
  };
  Shard& ShardFor(const CacheKey& key) const;

  const size_t shard_count_;
  std::unique_ptr<Shard[]> shards_;
};

}  // namespace tailcut
