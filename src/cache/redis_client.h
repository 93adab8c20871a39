// RedisClient: the asynchronous Redis client behind the L2 embedding cache. The server's IO
// threads call it and never block on Redis: every call queues a command and returns; a
// dedicated client thread runs the commands and calls back.
//
// RedisClient is the interface its users (EmbeddingCache, the admin API) see, so their tests
// can put a deterministic fake behind it; RedisClientImpl is the hiredis implementation, and
// the contract below (callbacks, threads, status codes) is what both promise.
//
// RedisClientImpl's design:
//  - One hiredis (blocking) connection, owned by the client thread. Each round the thread
//    takes everything queued, writes it as one pipeline (redisAppendCommandArgv...) and reads
//    the replies in order, so N concurrent calls cost about one round trip, not N. The
//    arguments are binary-safe (argv + lengths).
//  - Deadlines: every command must complete by its call time + command_timeout_millis, queue
//    wait included. Every read() waits (ppoll) and every write() blocks (SO_SNDTIMEO) at most
//    until the earliest deadline among the commands still unanswered, so a stalled server
//    (SIGSTOP, long script, full buffers) costs at most that. A timed-out connection is
//    dropped (its pending replies would otherwise be read as the answers to later commands)
//    and every command still waiting on it fails with DeadlineExceeded.
//  - Connections are made lazily, on the first command and after a loss. The first
//    reconnect is immediate; failed ones back off exponentially (reconnect_backoff_*), during
//    which commands fail at once. AUTH (password, or ACL user + password) and SELECT are
//    pipelined in front of the first round on a new connection. The password is never logged.
//  - A CircuitBreaker counts rounds: a round fails when the connection, the handshake or the
//    server (LOADING, BUSY, MASTERDOWN) fails, and succeeds when replies come back (an error
//    reply to one command, e.g. WRONGTYPE, is that command's error, not an outage). While
//    open, calls fail on the CALLER's thread with Unavailable("redis circuit open") at the
//    cost of one atomic load, so L2 is bypassed for free; after breaker_open_millis the client
//    thread sends its own PING probe, so it recovers with no help from callers.
//  - SubmitRaw() is the door RedisClusterClient (redis_cluster_client.h) uses: one node
//    connection per cluster master is one RedisClientImpl, given commands with their keys
//    already routed and prefixed, the original call's deadline (a redirect's retry keeps it),
//    error replies handed back as replies (MOVED/ASK are followed by the caller) and ASKING
//    sent right before a command on the same connection.
//  - Every callback is called exactly once: with the reply, or an error, by the command's
//    deadline (+ scheduling slack), or at once when rejected (circuit open, queue full, client
//    shutting down) or shut down (destructor). Blocking DNS and connect are the exception:
//    a connect is bounded by connect_timeout_millis and by the earliest pending deadline.
//
// Callbacks run on the client thread (or, for rejections, on the calling thread, before the
// call returns). They must be short and must not block: the next round waits for them. They
// may call this client again (e.g. Set after a miss); they must not destroy it.
//
// Status codes: Unavailable (circuit open, queue full, connection failed or lost, shutting
// down), DeadlineExceeded (timeout), Unauthenticated (AUTH failed, NOAUTH), PermissionDenied
// (ACL NOPERM), InvalidArgument (bad SELECT db, bad argument), Internal (other error replies,
// unexpected reply shapes).
//
// Metrics (one RedisClientImpl per registry; the families are created in the constructor):
//   tailcut_redis_commands_total{command,result="ok|error|timeout|rejected"}
//   tailcut_redis_command_duration_seconds{command}  call -> callback, rejected ones excluded
//   tailcut_redis_breaker_state  0 closed, 1 half-open, 2 open
//   tailcut_redis_breaker_transitions_total{to}
//   tailcut_redis_queue_depth    commands queued, not yet sent
//   tailcut_redis_reconnects_total  connections established after the first
//
// Thread-safety: every public method is safe from any thread, concurrently. RedisClientImpl's
// Clock must be a real-time clock (socket timeouts and waits are real); breaker logic is
// tested with a ManualClock in circuit_breaker_test.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "cache/circuit_breaker.h"
#include "common/clock.h"
#include "common/status.h"
#include "obs/metrics.h"

struct redisContext;
struct redisReply;

namespace tailcut {

struct RedisOptions {
  // Server address. A host name is resolved with blocking getaddrinfo on every connect; use an
  // IP (or a local resolver) where DNS may be slow.
  std::string host = "127.0.0.1";
  int port = 6379;
  // ACL user; empty = AUTH with the password alone (Redis's "default" user).
  std::string username;
  // Empty = no AUTH. Held in memory for reconnects, never logged.
  std::string password;
  // Logical database (SELECT); 0 needs no command. Only for standalone Redis.
  int db = 0;
  // Namespace of every key ("<prefix>:<key>"); one per deployment so that deployments sharing
  // a Redis neither read each other's entries nor delete them. Empty = no prefix.
  std::string key_prefix = "tailcut";
  // Bounds one connect attempt (TCP + hiredis set-up). Generous next to a LAN RTT; lower it
  // if a dead host must be noticed faster.
  int64_t connect_timeout_millis = 200;
  // Bounds each command from call to callback, queueing included. An L2 hit must beat
  // recomputing the embedding, so keep this below the model's batch latency; raising it only
  // makes a sick Redis slower to give up on.
  int64_t command_timeout_millis = 50;
  // TTL of cache entries written by Set() when it is given ttl_seconds <= 0. Bounds how long
  // a stale entry (e.g. of a retired model file) lingers. <= 0 here = no expiry.
  int64_t entry_ttl_seconds = 3600;
  // Bound on commands waiting for the client thread. Beyond it calls fail at once
  // (Unavailable, counted as rejected) rather than queue for longer than they can be useful.
  // Roughly: peak calls per second x command timeout, with headroom.
  size_t max_queued_commands = 10000;
  // Consecutive failed rounds that open the breaker (<= 0: never open). See CircuitBreaker.
  int breaker_failure_threshold = 5;
  // How long the breaker stays open before probing; the longest a recovered Redis goes unused.
  int64_t breaker_open_millis = 1000;
  // Wait before reconnecting after a failed connect/handshake: starts at min, doubles per
  // failure up to max, resets after a good round. Keeps a dead server from being hammered
  // when the breaker is disabled; half-open probes ignore it (the breaker paces those).
  int64_t reconnect_backoff_min_millis = 10;
  int64_t reconnect_backoff_max_millis = 1000;

  // Redis Cluster (RedisClusterClient; the settings above apply to each node's connection).
  // Seed nodes, "host:port,host:port": any nodes of the cluster, the rest are learnt from
  // CLUSTER SLOTS; list more than one so that start-up does not hang on one node. Empty =
  // a standalone Redis at host:port. With it db must be 0 (a cluster has only database 0).
  std::string cluster_nodes;
  // How often the slot map is fetched again while calls are made. MOVED replies and failing
  // nodes refresh it sooner, so this only bounds how long a change no reply reveals (a new
  // replica to ask when the masters are gone) goes unnoticed. One small reply per refresh.
  int64_t cluster_topology_refresh_millis = 5000;
  // Shortest gap between refreshes caused by failures: during a failover (node timeout plus
  // election, ~1-2 s with cluster-node-timeout 500) the cluster is asked this often, which
  // bounds both the load on it and how late the promoted replica is found.
  int64_t cluster_refresh_min_interval_millis = 100;
  // Redirects (MOVED/ASK) one call follows before it fails with Unavailable. Each costs a
  // round trip inside the call's command_timeout_millis; a slot in migration needs two (ASK,
  // then MOVED once it is done), so more than a few means a cluster in flux.
  int cluster_max_redirects = 5;
};

class RedisClient {
 public:
  using BreakerState = CircuitBreaker::State;

  // Counters for tests and benchmarks (also visible as metrics).
  struct Stats {
    uint64_t round_trips = 0;    // Pipelines written and read back.
    uint64_t commands_sent = 0;  // Commands in them (handshake excluded).
    uint64_t connects = 0;       // Connections established.
  };

  virtual ~RedisClient() = default;

  // One MGET; the result has one entry per key, nullopt for a missing key. No keys: done()
  // runs at once with an empty vector.
  virtual void MultiGet(
      std::vector<std::string> keys,
      std::function<void(Result<std::vector<std::optional<std::string>>>)> done) = 0;
  virtual void Get(std::string key,
                   std::function<void(Result<std::optional<std::string>>)> done) = 0;
  // SET key value EX ttl; ttl_seconds <= 0 uses entry_ttl_seconds. `done` may be null.
  virtual void Set(std::string key, std::string value, int64_t ttl_seconds,
                   std::function<void(Status)> done) = 0;
  // SET key token NX PX ttl_millis: true if this caller now holds the lock.
  virtual void TryLock(std::string key, std::string token, int64_t ttl_millis,
                       std::function<void(Result<bool>)> done) = 0;
  // Deletes the lock only if `token` still owns it (Lua compare-and-delete, atomic on the
  // server): true if deleted. A lock that expired and was taken by someone else is left
  // alone. `done` may be null.
  virtual void Unlock(std::string key, std::string token,
                      std::function<void(Result<bool>)> done) = 0;
  // Deletes every key of this client's prefix matching the glob `pattern` (SCAN MATCH +
  // UNLINK, kScanBatch keys per step); the count of deleted keys. Each step has the command
  // timeout; the whole takes one round trip per step, so it scales with the keyspace. Meant
  // for admin paths (cache flush), not requests. Not atomic against concurrent writers.
  virtual void DeleteByPattern(std::string pattern, std::function<void(Result<int64_t>)> done) = 0;
  virtual void Ping(std::function<void(Status)> done) = 0;

  // Redis Streams as an append-only log that several clients share (each entry one value,
  // in field "v"). Stream keys are prefixed like the others but get no TTL: MAXLEN bounds
  // them. Ids are "<ms>-<seq>", increasing; compare them as that pair of numbers, not as text.
  struct StreamEntry {
    std::string id;
    std::string value;

    bool operator==(const StreamEntry&) const = default;
  };
  // XADD key MAXLEN ~ max_entries * v <value>: appends `value` to the stream `key` (made if
  // missing) and returns the new entry's id. Trimming is approximate (`~`): Redis removes
  // whole stream nodes only (stream-node-max-entries, 100 by default), so at least
  // max_entries and at most about max_entries + a node's worth stay. max_entries <= 0: no
  // trimming. `done` may be null.
  virtual void StreamAppend(std::string key, std::string value, int64_t max_entries,
                            std::function<void(Result<std::string>)> done) = 0;
  // XRANGE key (after_id + COUNT count: up to `count` entries with ids greater than
  // `after_id`, oldest first; "" or "0-0" = from the start. Empty when there are none or the
  // stream does not exist, so a reader polls with the last id it has seen, and reads a whole
  // stream page by page. An entry without field "v" (not written by StreamAppend) comes back
  // with an empty value, so that a reader still moves past it. InvalidArgument, at once, for
  // count <= 0 or an after_id that is not "<ms>", "<ms>-<seq>" or "".
  virtual void StreamRead(std::string key, std::string after_id, int64_t count,
                          std::function<void(Result<std::vector<StreamEntry>>)> done) = 0;

  virtual BreakerState breaker_state() const = 0;
  virtual Stats stats() const = 0;

  static constexpr int kScanBatch = 1000;
};

class RedisClientImpl final : public RedisClient {
 public:
  // Starts the client thread; connects on the first command. `metrics` may be null.
  RedisClientImpl(const RedisOptions& options, const Clock& clock, MetricsRegistry* metrics);
  // Stops the thread (Shutdown()).
  ~RedisClientImpl() override;

  RedisClientImpl(const RedisClientImpl&) = delete;
  RedisClientImpl& operator=(const RedisClientImpl&) = delete;

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

  BreakerState breaker_state() const override { return breaker_.state(); }
  Stats stats() const override;
  // "<key_prefix>:<key>", the key as stored in Redis.
  std::string PrefixedKey(std::string_view key) const;

  // Called once with the reply (status OK, reply non-null and not an error reply) or with an
  // error status (reply null). The reply is freed after it returns.
  using ReplyHandler = std::function<void(const redisReply* reply, const Status& status)>;

  // For RedisClusterClient: `argv` exactly as given (no key prefix added), due by the absolute
  // Clock time `deadline_micros`. Unlike the typed calls, an error reply reaches `handler` as
  // a reply (status OK, type REDIS_REPLY_ERROR), so that the caller can follow MOVED/ASK;
  // failures without a reply (connection, timeout, circuit open, queue full, shut down) come
  // as a status, as for ReplyHandler. `asking` sends ASKING right before the command on the
  // same connection (ASK redirection). Breaker, queue bound and callback rules as above.
  void SubmitRaw(std::vector<std::string> argv, int64_t deadline_micros, bool asking,
                 ReplyHandler handler);

  // Stops the thread: commands in flight or queued get Unavailable, later calls are rejected
  // at once (on the caller's thread), while the object stays usable. Idempotent; may wait for
  // a connect in progress (<= connect_timeout_millis). Not from one of this client's
  // callbacks. RedisClusterClient stops every node before destroying any, so that a callback
  // running on one node's thread never reaches a node that is gone.
  void Shutdown();

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
    kRaw,
    kCount
  };
  enum class Outcome : uint8_t { kOk, kError, kTimeout, kRejected, kCount };

  struct Command {
    Op op;
    std::vector<std::string> argv;
    int64_t enqueue_micros;
    int64_t deadline_micros;
    ReplyHandler handler;
    bool raw = false;     // SubmitRaw: error replies go to the handler as replies.
    bool asking = false;  // ASKING goes right before it.
  };

  struct Metrics {
    std::array<std::array<Counter*, static_cast<size_t>(Outcome::kCount)>,
               static_cast<size_t>(Op::kCount)>
        commands;
    std::array<Histogram*, static_cast<size_t>(Op::kCount)> duration;
    Gauge* breaker_state;
    Family<Counter>* transitions;
    Gauge* queue_depth;
    Counter* reconnects;
  };

  struct DeleteState;
  void ScanStep(std::shared_ptr<DeleteState> state, bool internal);

  // Queues a command, or completes it at once (rejected) on this thread. `internal` commands
  // (follow-ups, probes) skip the breaker and the queue bound.
  void Submit(Op op, std::vector<std::string> argv, ReplyHandler handler, bool internal = false);
  void Enqueue(Command cmd, bool internal);
  void Complete(Command& cmd, const redisReply* reply, const Status& status, Outcome outcome);
  void FailAll(std::vector<Command>& cmds, size_t from, const Status& status, Outcome outcome);

  // Client thread.
  void Run();
  void RunRound(std::vector<Command>& cmds);
  Status Connect(int64_t deadline_micros);
  void DropConnection();
  Status Flush(int64_t deadline_micros);
  Status ReadReply(int64_t deadline_micros, redisReply** reply);
  Status IoError(int saved_errno);
  void BackOff(const Status& failure);
  void ReportDown(const Status& failure);
  void OnBreakerTransition(BreakerState from, BreakerState to);

  const RedisOptions options_;
  const Clock& clock_;
  const std::string prefix_;                      // "<key_prefix>:" or empty.
  std::unique_ptr<MetricsRegistry> own_metrics_;  // When none was given.
  Metrics metrics_;
  CircuitBreaker breaker_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Command> queue_;  // Under mu_.
  bool waiting_ = false;        // Under mu_: the client thread sleeps on cv_.
  std::atomic<bool> stopping_{false};
  std::mutex shutdown_mu_;  // Serializes Shutdown() (the destructor and an explicit call).

  // The live connection's fd, published so the destructor can shutdown() a blocked read.
  std::mutex fd_mu_;
  int active_fd_ = -1;  // Under fd_mu_.

  // Client thread only.
  redisContext* ctx_ = nullptr;
  bool handshake_done_ = false;
  bool connected_before_ = false;
  bool reported_down_ = false;  // Logged the outage; log again only after a recovery.
  int64_t next_connect_micros_ = 0;
  int64_t reconnect_delay_millis_ = 0;
  Status last_failure_;  // Of the last connect/handshake; returned while backing off.

  std::atomic<uint64_t> round_trips_{0};
  std::atomic<uint64_t> commands_sent_{0};
  std::atomic<uint64_t> connects_{0};

  std::thread thread_;  // Last: starts after everything above is built.
};

// Shared by RedisClientImpl and RedisClusterClient: the commands' reply shapes and the
// meaning of error replies, so both clients answer alike.
namespace redis_internal {

// Compare-and-delete for Unlock (EVAL <script> 1 <key> <token>).
extern const char kUnlockScript[];

// Maps an error reply's text to a Status; `outage` is set when it means the server cannot
// serve anything right now (LOADING, BUSY, MASTERDOWN, TRYAGAIN, CLUSTERDOWN, NOAUTH), as
// opposed to this one command being wrong.
Status ErrorReplyStatus(std::string_view msg, bool* outage);
// SCAN MATCH treats * ? [ ] \ as glob syntax; a prefix containing them must match literally.
std::string EscapeGlob(std::string_view s);

// "<key_prefix>:" (empty for no prefix), and a key with it: the key as stored in Redis.
std::string KeyPrefix(const RedisOptions& options);
std::string Prefixed(std::string_view prefix, std::string_view key);

// Typed results of non-error replies.
Result<std::vector<std::optional<std::string>>> MgetValues(const redisReply* r, size_t n);
Result<std::optional<std::string>> GetValue(const redisReply* r);
Status SetOk(const redisReply* r);
Result<bool> TryLockHeld(const redisReply* r);
Result<bool> UnlockDeleted(const redisReply* r);
Status PingOk(const redisReply* r);
Result<std::string> StreamAppendId(const redisReply* r);
Result<std::vector<RedisClient::StreamEntry>> StreamEntries(const redisReply* r);

// A stream id, "<ms>-<seq>" or "<ms>" (seq 0), as the pair Redis orders ids by; nullopt if
// malformed (empty, a sign, not digits, out of 64 bits).
std::optional<std::pair<uint64_t, uint64_t>> ParseStreamId(std::string_view id);
// The commands of StreamAppend and StreamRead, for a key already prefixed; StreamReadArgv
// checks count and after_id (InvalidArgument).
std::vector<std::string> StreamAppendArgv(std::string key, std::string value, int64_t max_entries);
Result<std::vector<std::string>> StreamReadArgv(std::string key, std::string_view after_id,
                                                int64_t count);

// The per-command metrics both clients export, one child per (command, result):
// tailcut_redis_commands_total{command,result} and
// tailcut_redis_command_duration_seconds{command}; `duration_help` says what the duration
// spans for that client. commands[op][outcome] and duration[op] are filled for every name in
// `op_names` (outcomes: ok, error, timeout, rejected, in that order).
void AddCommandMetrics(MetricsRegistry& registry, std::string_view duration_help,
                       std::span<const char* const> op_names,
                       std::span<std::array<Counter*, 4>> commands, std::span<Histogram*> duration);

}  // namespace redis_internal
}  // namespace tailcut
