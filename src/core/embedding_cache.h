// EmbeddingCache: the cache hierarchy in front of a text model's batch queue, so that a
// repeated input costs microseconds and never waits behind the batcher (Triton's order:
// cache first, queue second). For each input of a request, in order:
//
//   1. L1 (in-process, W-TinyLFU) on the calling (work-pool) thread (an item's read_first
//      key, when it has one, before its own);
//   2. L2 (Redis, optional) with one pipelined MGET for all of the request's L1 misses;
//   3. single-flight in this process: a miss whose key is already being computed waits for
//      that computation instead of queueing a second one;
//   4. with Redis, single-flight across replicas: the first replica to miss takes a lock
//      (SET NX PX with a random token) and computes; the others poll L2 for its value for a
//      bounded time, then compute themselves if the holder died;
//   5. only then the model's queue.
// A request that waits at any of steps 2-5 is failed with DeadlineExceeded at its deadline
// (Request::deadline_micros), wherever it is waiting then.
// Computed rows are stored in L1 and L2 (unless the request said no-store), the Redis lock is
// released by its owner only (Lua compare-and-delete), and waiting requests get the row.
//
// The cache tier failing is never the service failing: every L2 error, timeout or open
// circuit degrades to "miss" and the model computes.
//
// Thread-safety: every method is safe from any thread.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "cache/cache_key.h"
#include "cache/l1_cache.h"
#include "cache/redis_client.h"
#include "cache/single_flight.h"
#include "common/delayed_executor.h"
#include "core/embed_job.h"
#include "obs/metrics.h"

namespace tailcut {

struct EmbeddingCacheOptions {
  // Share one computation between identical concurrent misses in this process.
  bool single_flight = true;
  // With Redis: one replica computes a missing key while the others wait for its value.
  // Costs one extra Redis round trip per miss; turn off for a single replica.
  bool distributed_single_flight = true;
  // Expiry of the cross-replica lock: the longest other replicas wait for a holder that died
  // without releasing it (the source's warm-up lock uses 10 s).
  int64_t lock_ttl_millis = 10'000;
  // How long a replica waits for another replica's computation before computing itself.
  // Should exceed one batch's latency at load; the request's own deadline still applies.
  int64_t remote_wait_millis = 500;
  // How often a waiting replica polls L2 for the value.
  int64_t remote_poll_millis = 2;
};

class EmbeddingCache {
 public:
  // `l1` and `l2` may be null (that tier is off); both must outlive this object. `clock` is
  // the one deadlines (Request::deadline_micros) are given on, and it times every wait here:
  // deadlines, polls for another replica's value, remote_wait_millis.
  EmbeddingCache(const EmbeddingCacheOptions& options, L1Cache* l1, RedisClient* l2,
                 const Clock& clock, MetricsRegistry* metrics);
  ~EmbeddingCache();

  struct Item {
    Item() = default;
    Item(size_t index, std::vector<int64_t> ids, CacheKey key,
         std::optional<CacheKey> read_first = std::nullopt, std::vector<int64_t> type_ids = {})
        : index(index),
          ids(std::move(ids)),
          key(key),
          read_first(read_first),
          type_ids(std::move(type_ids)) {}

    size_t index = 0;
    std::vector<int64_t> ids;
    CacheKey key;  // Where the computed row is stored, and looked up.
    // Looked up before `key` (L1, then in the same L2 round trip) and never written: the
    // reference variant's entry while the controller serves an interchangeable fast variant,
    // so a precision switch does not turn every cached row into a miss.
    std::optional<CacheKey> read_first;
    // A reranker's pair: the token types of `ids` (the key covers them). Empty = all 0.
    std::vector<int64_t> type_ids;
  };
  // Schedules items the model must compute; each carries its ticket. An error (queue full)
  // fails the whole request.
  using ScheduleFn =
      std::function<Status(std::vector<std::pair<Item, std::optional<CacheTicket>>>&&)>;
  struct Request {
    std::shared_ptr<EmbedJob> job;
    uint32_t tag = 0;   // The model's L1 tag.
    std::string model;  // L2 key namespace.
    bool read = true;   // Cache-Control: no-cache turns this off.
    bool write = true;  // Cache-Control: no-store turns this off.
    // When the request must be answered by (clock micros; 0 = no deadline). Every wait it
    // enters here (an L2 lookup, another request's computation, another replica's, the
    // model's queue and batch) ends at this time with DeadlineExceeded, not when the wait
    // does. The job should be allocated on its own (not make_shared): the timer holds a
    // weak_ptr to it until the deadline.
    int64_t deadline_micros = 0;
    ScheduleFn schedule;
  };

  // Resolves every item of a request: from caches, from other computations, or by
  // scheduling. Completes or fails the request's job eventually; returns at once.
  void Resolve(Request request, std::vector<Item> items);

  // A leader's row is computed: store it, release the lock, feed waiting requests.
  void OnComputed(const CacheTicket& ticket, std::span<const float> row);
  // A leader's computation failed (deadline, shutdown): waiting requests compute themselves.
  void OnComputeFailed(const CacheTicket& ticket, const Status& status);

  // Warm-up: loads the L2 values of `keys` into L1 (refreshing their L1 TTL) and reports the
  // keys L2 did not have. Without L2, reports them all.
  void Prefetch(const std::string& model, uint32_t tag, size_t dims, std::vector<CacheKey> keys,
                std::function<void(std::vector<CacheKey> missing)> done);
  // Warm-up: remembers `keys` in L2 as the model's hot set, for the next process's start.
  void PersistHotSet(const std::string& model, const std::vector<CacheKey>& keys);
  // Start-up: loads the persisted hot set's values into L1; `done` gets how many.
  void LoadHotSet(const std::string& model, uint32_t tag, size_t dims,
                  std::function<void(size_t loaded)> done);

  // Removes a model's entries from L1 (by tag) and L2 (by key pattern).
  void Flush(uint32_t tag, const std::string& model, std::function<void(Result<int64_t>)> done);

  // Makes the timers (deadlines, polls for another replica) look at the clock now instead
  // of at their next real-time check; for tests that move a ManualClock.
  void PokeTimers() { delayed_.Poke(); }

  L1Cache* l1() const { return l1_; }
  RedisClient* l2() const { return l2_; }
  // Tag for a model name, stable for the process's life.
  uint32_t TagFor(const std::string& model);

 private:
  struct Metrics;
  struct Pending;  // One request's state while it is being resolved.

  // A request that did not complete from L1 fails at its deadline, whatever it waits for.
  void ArmDeadline(const Pending& p);
  void LookupL2(std::shared_ptr<Pending> p, std::vector<Item> misses);
  void SingleFlightAndSchedule(std::shared_ptr<Pending> p, std::vector<Item> misses);
  void LockOrWait(std::shared_ptr<Pending> p, std::vector<Item> leaders);
  void WaitForRemote(std::shared_ptr<Pending> p, Item item, int64_t give_up_micros);
  // What a request waiting on another's computation of `item` does with its outcome.
  SingleFlight::Waiter MakeWaiter(std::shared_ptr<Pending> p, Item item);
  // Serves `item` from a value another replica stored and shares it with local waiters;
  // false if the bytes do not decode.
  bool TakeRemoteValue(const std::shared_ptr<Pending>& p, const Item& item,
                       const std::string& bytes);
  static CacheTicket TicketFor(const Pending& p, const Item& item, bool leader);
  void Schedule(const std::shared_ptr<Pending>& p,
                std::vector<std::pair<Item, std::optional<CacheTicket>>> items);
  void StoreAndShare(const CacheTicket& ticket, std::span<const float> row);
  std::string L2Key(const std::string& model, const CacheKey& key) const;
  std::string LockKey(const std::string& model, const CacheKey& key) const;
  std::string NewToken();

  const EmbeddingCacheOptions options_;
  L1Cache* const l1_;
  RedisClient* const l2_;
  const Clock& clock_;
  std::unique_ptr<Metrics> metrics_;
  SingleFlight flights_;
  DelayedExecutor delayed_;
  std::mutex mutex_;  // Guards tags_ and rng_.
  std::vector<std::string> tags_;
  std::mt19937_64 rng_;
};

}  // namespace tailcut
