// RedisClusterClient: the L2 cache client for a Redis Cluster, behind the same RedisClient
// interface (and contract: callbacks, threads, deadlines, status codes) as RedisClientImpl, so
// EmbeddingCache and the admin API do not know which one they talk to.
//
// Debian 12, the project's only C/C++ package source, has hiredis 0.14 but no cluster client
// (hiredis-cluster and redis-plus-plus are not packaged), so the routing is ours, small, on
// top of RedisClientImpl, and tested against a real local cluster
// (tests/cache/redis_cluster_client_test.cc).
//
// Design:
//  - One RedisClientImpl per node, made when the node is first needed (a master in the slot
//    map, a redirect's target, a seed): its own connection and client thread, pipelined
//    rounds, circuit breaker and reconnect backoff, so a dead master costs only the calls
//    for its slots, failed at once while its breaker is open. Nodes are kept until the
//    client is destroyed (a cluster has a handful; a retired one idles on its thread, its
//    breaker probing now and then).
//  - Slot map: CLUSTER SLOTS, fetched from the current masters, then the seeds, then the
//    replicas, whichever answers first. Fetched at start, when a MOVED reply or a failed
//    node (connection lost, timeout, circuit open, CLUSTERDOWN) says it changed, at most every
//    cluster_refresh_min_interval_millis, and every cluster_topology_refresh_millis while
//    calls are made. Until it is known, calls go to a seed and follow its MOVED.
//  - Routing: a key's slot is CRC16 of its hash tag or whole key (redis_cluster_slots.h), of
//    the key as stored ("<key_prefix>:<key>"). MOVED updates the slot's owner and retries
//    there; ASK retries once at the named node after ASKING, on the same connection, leaving
//    the map alone. At most cluster_max_redirects per call, all within the call's deadline
//    (call time + command_timeout_millis: a retry never extends it).
//  - MultiGet splits its keys by slot, one MGET per slot (a cross-slot MGET would be refused
//    with CROSSSLOT), pipelined on each node's connection, and merges the values in the keys'
//    order. If some slots fail (their master is down, failing over), their keys come back as
//    misses and the rest as found: the cache recomputes only those; if every slot fails, the
//    call fails. TryLock, Unlock (EVAL, one key), Get, Set, StreamAppend and StreamRead
//    route by their one key (a stream is one key: the whole log lives on one master).
//    DeleteByPattern fetches the slot map afresh, then runs SCAN on every master and UNLINK
//    per slot of the keys found. Ping pings every master.
//  - Hash tags: none are added. No command here needs two keys on one slot (MGET is split,
//    the lock script takes one key), and tagging a request's keys into one slot would give
//    one text a different key in each request, so no request could reuse another's entry.
//    (For the same reason the configuration refuses a '{' in key_prefix in cluster mode: a
//    tag there would put every key of the deployment in one slot, on one master.)
//
// Callbacks run on a node's client thread, or on the caller's thread when rejected at once
// (circuit open, queue full, shutting down); the rules of redis_client.h apply. Every callback
// is called exactly once, by its deadline (+ scheduling slack).
//
// Metrics (one RedisClusterClient per registry, instead of a RedisClientImpl; the nodes'
// own metrics stay private):
//   tailcut_redis_commands_total{command,result}, tailcut_redis_command_duration_seconds
//     per call as for RedisClientImpl (DeleteByPattern: per SCAN and UNLINK step)
//   tailcut_redis_breaker_state  the worst breaker among the masters (2 if any is open)
//   tailcut_redis_cluster_node_breaker_state{node}  per node ever used
//   tailcut_redis_cluster_masters  masters in the slot map
//   tailcut_redis_cluster_redirects_total{kind="moved|ask"}
//   tailcut_redis_cluster_topology_refreshes_total{result="ok|error"}
//   tailcut_redis_cluster_partial_mgets_total  MultiGets some of whose slots failed
//
// Thread-safety: every public method is safe from any thread, concurrently.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cache/redis_client.h"
#include "cache/redis_cluster_slots.h"
#include "common/clock.h"
#include "common/status.h"
#include "obs/metrics.h"

namespace tailcut {

class RedisClusterClient final : public RedisClient {
 public:
  // Checks options.cluster_nodes (at least one host:port) and options.db (must be 0), then
  // starts fetching the slot map; connects lazily. `metrics` may be null.
  static Result<std::unique_ptr<RedisClusterClient>> Create(const RedisOptions& options,
                                                            const Clock& clock,
                                                            MetricsRegistry* metrics);
  // Stops every node's thread, then frees them: calls in flight or queued get Unavailable.
  ~RedisClusterClient() override;

  RedisClusterClient(const RedisClusterClient&) = delete;
  RedisClusterClient& operator=(const RedisClusterClient&) = delete;

  void MultiGet(std::vector<std::string> keys,
                std::function<void(Result<std::vector<std::optional<std::string>>>)> done) override;
  void Get(std::string key, std::function<void(Result<std::optional<std::string>>)> done) override;
  void Set(std::string key, std::string value, int64_t ttl_seconds,
           std::function<void(Status)> done) override;
  void TryLock(std::string key, std::string token, int64_t ttl_millis,
               std::function<void(Result<bool>)> done) override;
  void Unlock(std::string key, std::string token, std::function<void(Result<bool>)> done) override;
  void DeleteByPattern(std::string pattern, std::function<void(Result<int64_t>)> done) override;
  void Ping(std::function<void(Status)> done) override;
  void StreamAppend(std::string key, std::string value, int64_t max_entries,
                    std::function<void(Result<std::string>)> done) override;
  void StreamRead(std::string key, std::string after_id, int64_t count,
                  std::function<void(Result<std::vector<StreamEntry>>)> done) override;

  // The worst state among the masters of the slot map (the seeds' before it is known).
  BreakerState breaker_state() const override;
  // Summed over the nodes.
  Stats stats() const override;

  // Cluster counters, for tests and benchmarks (also visible as metrics).
  struct ClusterStats {
    uint64_t moved = 0;             // MOVED redirects followed.
    uint64_t ask = 0;               // ASK redirects followed.
    uint64_t refreshes = 0;         // Slot maps installed.
    uint64_t refresh_failures = 0;  // Fetches no node answered.
    size_t nodes = 0;               // Node clients made.
  };
  ClusterStats cluster_stats() const;

  // Fetches the slot map now (whatever the rate limits) and calls `done` once it is
  // installed or no node answered. For tests and admin paths.
  void RefreshTopology(std::function<void(Status)> done);
  // The master serving `slot` in the current map; nullopt while unknown.
  std::optional<RedisNodeAddress> SlotOwner(int slot) const;
  // "<key_prefix>:<key>", the key as stored (and hashed).
  std::string PrefixedKey(std::string_view key) const;

 private:
  enum class Op : uint8_t {
    kMget,
    kGet,
    kSet,
    kTryLock,
    kUnlock,
    kScan,
    kUnlink,
    kPing,
    kStreamAppend,
    kStreamRead,
    kCount
  };
  enum class Outcome : uint8_t { kOk, kError, kTimeout, kRejected, kCount };
  using ReplyHandler = RedisClientImpl::ReplyHandler;

  struct Node {
    RedisNodeAddress address;
    std::string name;  // address.ToString()
    std::unique_ptr<RedisClientImpl> client;
    Gauge* breaker_gauge = nullptr;
  };
  struct Call;
  struct Fetch;
  struct MgetJoin;
  struct DeleteJob;
  // Lets the registry's collect hook reach the client while it lives (and not after).
  struct HookTarget {
    std::mutex mu;
    RedisClusterClient* client = nullptr;
  };

  struct Metrics {
    std::array<std::array<Counter*, static_cast<size_t>(Outcome::kCount)>,
               static_cast<size_t>(Op::kCount)>
        commands;
    std::array<Histogram*, static_cast<size_t>(Op::kCount)> duration;
    Gauge* breaker_state;
    Family<Gauge>* node_breaker;
    Gauge* masters;
    Counter* moved;
    Counter* ask;
    Counter* refresh_ok;
    Counter* refresh_error;
    Counter* partial_mgets;
  };

  RedisClusterClient(const RedisOptions& options, std::vector<RedisNodeAddress> seeds,
                     const Clock& clock, MetricsRegistry* metrics);

  // Routes one single-slot command by `slot`, following redirects within `deadline_micros`.
  // `handler` gets the reply (never an error reply: those become a status) or an error.
  void Route(int slot, std::vector<std::string> argv, int64_t deadline_micros,
             ReplyHandler handler);
  void Send(std::shared_ptr<Call> call);
  void OnReply(const std::shared_ptr<Call>& call, Node* node, const redisReply* reply,
               const Status& status);
  // Records the call's metrics (start = call time).
  void Count(Op op, int64_t start_micros, const Status& status);

  // Slot map upkeep. RequestRefresh starts a fetch unless one is in flight or the last began
  // less than the interval ago (urgent: the minimum interval; else the periodic one).
  void RequestRefresh(bool urgent);
  void FetchStep(std::shared_ptr<Fetch> fetch);
  void EndFetch(const std::shared_ptr<Fetch>& fetch, const Status& status);
  void Install(const std::vector<RedisSlotRange>& ranges, const RedisNodeAddress& from);
  std::vector<RedisNodeAddress> RefreshCandidatesLocked() const;
  std::vector<Node*> MastersLocked() const;

  // The node for an address, made on first use; null once shutting down.
  Node* NodeForLocked(const RedisNodeAddress& address);
  Node* NodeFor(const RedisNodeAddress& address);
  // The slot's master, or a seed while the slot's owner is unknown; null once shutting down.
  Node* NodeForSlot(int slot);

  void ScanStep(const std::shared_ptr<DeleteJob>& job, Node* node, std::string cursor);
  void UpdateGauges();

  const RedisOptions options_;
  const std::vector<RedisNodeAddress> seeds_;
  const Clock& clock_;
  const std::string prefix_;  // "<key_prefix>:" or empty.
  std::unique_ptr<MetricsRegistry> own_metrics_;
  MetricsRegistry* registry_;
  Metrics metrics_;
  std::shared_ptr<HookTarget> hook_;

  mutable std::mutex mu_;
  bool stopping_ = false;                                    // Under mu_.
  std::map<RedisNodeAddress, std::unique_ptr<Node>> nodes_;  // Under mu_; never shrinks.
  std::array<Node*, kRedisClusterSlots> owner_{};            // Under mu_; null = unknown.
  std::vector<RedisNodeAddress> replicas_;                   // Under mu_.
  std::vector<std::string> master_names_;                    // Under mu_: last logged.
  size_t next_seed_ = 0;                                     // Under mu_.
  bool refreshing_ = false;                                  // Under mu_.
  bool refreshed_once_ = false;                              // Under mu_.
  int64_t last_refresh_micros_ = 0;                          // Under mu_.

  std::atomic<uint64_t> moved_{0};
  std::atomic<uint64_t> ask_{0};
  std::atomic<uint64_t> refreshes_{0};
  std::atomic<uint64_t> refresh_failures_{0};
};

}  // namespace tailcut
