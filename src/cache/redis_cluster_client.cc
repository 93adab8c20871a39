#include "cache/redis_cluster_client.h"

#include <hiredis/hiredis.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>
#include <utility>

namespace tailcut {
namespace {

using redis_internal::ErrorReplyStatus;
using Values = std::vector<std::optional<std::string>>;

constexpr const char* kOpNames[] = {"mget", "get",    "set",  "trylock", "unlock",
                                    "scan", "unlink", "ping", "xadd",    "xrange"};

std::string_view ReplyText(const redisReply* r) {
  return {r->str, static_cast<size_t>(r->len)};
}

int BreakerRank(RedisClient::BreakerState s) {
  return s == RedisClient::BreakerState::kClosed     ? 0
         : s == RedisClient::BreakerState::kHalfOpen ? 1
                                                     : 2;
}

}  // namespace

// One routed command across its redirects. Touched by one handler at a time: each attempt's
// handler runs once, and starts the next attempt (if any) itself.
struct RedisClusterClient::Call {
  int slot = 0;
  std::vector<std::string> argv;
  int64_t deadline_micros = 0;
  int redirects = 0;
  Node* ask_node = nullptr;  // The next attempt goes there, after ASKING.
  ReplyHandler handler;
};

// One slot-map fetch: the candidates are asked in turn until one answers.
struct RedisClusterClient::Fetch {
  std::vector<RedisNodeAddress> candidates;
  size_t next = 0;
  bool periodic = false;  // Started by RequestRefresh (clears refreshing_ when done).
  Status last_error = Status::Unavailable("redis cluster: no node to ask for the slot map");
  std::function<void(Status)> done;
};

// MultiGet's parts (one MGET per slot) joined: the last to arrive answers.
struct RedisClusterClient::MgetJoin {
  std::mutex mu;
  Values values;
  size_t remaining = 0;
  size_t parts = 0;
  size_t failed = 0;
  Status first_error;
  int64_t start_micros = 0;
  std::function<void(Result<Values>)> done;
};

// DeleteByPattern across masters: `pending` counts the SCAN and UNLINK steps not answered
// yet. A step's handler adds its follow-ups before it releases itself, so pending reaches 0
// exactly once, after the last step.
struct RedisClusterClient::DeleteJob {
  std::mutex mu;
  std::string pattern;  // Prefixed, ready for SCAN MATCH.
  int64_t deleted = 0;
  Status error;
  int pending = 0;
  std::function<void(Result<int64_t>)> done;

  void Acquire() {
    std::lock_guard<std::mutex> lock(mu);
    ++pending;
  }
  void Fail(const Status& s) {
    std::lock_guard<std::mutex> lock(mu);
    if (error.ok()) error = s;
  }
  bool failed() {
    std::lock_guard<std::mutex> lock(mu);
    return !error.ok();
  }
  void Add(int64_t n) {
    std::lock_guard<std::mutex> lock(mu);
    deleted += n;
  }
  void Release() {
    std::function<void(Result<int64_t>)> d;
    Result<int64_t> result = Status::Internal("unset");
    {
      std::lock_guard<std::mutex> lock(mu);
      if (--pending > 0 || !done) return;
      d = std::move(done);
      done = nullptr;
      if (error.ok()) {
        result = deleted;
      } else {
        result = error;
      }
    }
    d(std::move(result));
  }
};

Result<std::unique_ptr<RedisClusterClient>> RedisClusterClient::Create(const RedisOptions& options,
                                                                       const Clock& clock,
                                                                       MetricsRegistry* metrics) {
  Result<std::vector<RedisNodeAddress>> seeds = ParseRedisNodeList(options.cluster_nodes);
  if (!seeds.ok()) return seeds.status();
  if (options.db != 0) {
    return Status::InvalidArgument("redis cluster: db must be 0 (a cluster has only database 0)");
  }
  return std::unique_ptr<RedisClusterClient>(
      new RedisClusterClient(options, std::move(seeds).value(), clock, metrics));
}

RedisClusterClient::RedisClusterClient(const RedisOptions& options,
                                       std::vector<RedisNodeAddress> seeds, const Clock& clock,
                                       MetricsRegistry* metrics)
    : options_(options),
      seeds_(std::move(seeds)),
      clock_(clock),
      prefix_(redis_internal::KeyPrefix(options)),
      own_metrics_(metrics == nullptr ? std::make_unique<MetricsRegistry>() : nullptr),
      registry_(metrics != nullptr ? metrics : own_metrics_.get()),
      hook_(std::make_shared<HookTarget>()) {
  MetricsRegistry& registry = *registry_;
  static_assert(std::size(kOpNames) == static_cast<size_t>(Op::kCount));
  static_assert(static_cast<size_t>(Outcome::kCount) == 4);
  redis_internal::AddCommandMetrics(registry,
                                    "Time from a Redis client call to its callback, queueing and "
                                    "redirects included (rejected excluded).",
                                    kOpNames, metrics_.commands, metrics_.duration);
  metrics_.breaker_state =
      &registry
           .AddGauge("tailcut_redis_breaker_state",
                     "Redis circuit breaker state: 0 closed, 1 half-open, 2 open (cluster: the "
                     "worst among the masters).")
           .Get();
  metrics_.node_breaker = &registry.AddGauge(
      "tailcut_redis_cluster_node_breaker_state",
      "Redis Cluster: each node's circuit breaker (0 closed, 1 half-open, 2 open).", {"node"});
  metrics_.masters =
      &registry.AddGauge("tailcut_redis_cluster_masters", "Redis Cluster: masters in the slot map.")
           .Get();
  auto& redirects = registry.AddCounter("tailcut_redis_cluster_redirects_total",
                                        "Redis Cluster redirects followed, by kind.", {"kind"});
  metrics_.moved = &redirects.WithLabels({"moved"});
  metrics_.ask = &redirects.WithLabels({"ask"});
  auto& refreshes = registry.AddCounter(
      "tailcut_redis_cluster_topology_refreshes_total",
      "Redis Cluster slot-map fetches (CLUSTER SLOTS), by result (error: no node answered).",
      {"result"});
  metrics_.refresh_ok = &refreshes.WithLabels({"ok"});
  metrics_.refresh_error = &refreshes.WithLabels({"error"});
  metrics_.partial_mgets =
      &registry
           .AddCounter("tailcut_redis_cluster_partial_mgets_total",
                       "Redis Cluster MultiGets whose keys on failed slots came back as misses "
                       "(the other slots' values were used).")
           .Get();
  hook_->client = this;
  registry.AddCollectHook([hook = hook_] {
    std::lock_guard<std::mutex> lock(hook->mu);
    if (hook->client != nullptr) hook->client->UpdateGauges();
  });
  RequestRefresh(/*urgent=*/true);
}

RedisClusterClient::~RedisClusterClient() {
  {
    std::lock_guard<std::mutex> lock(hook_->mu);
    hook_->client = nullptr;
  }
  std::vector<Node*> nodes;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;  // From now on no node is made and nothing is routed.
    for (auto& [address, node] : nodes_) nodes.push_back(node.get());
  }
  // Every node stops before any is freed: a callback on one node's thread that reaches
  // another node finds it stopped (and is rejected at once), never freed.
  for (Node* n : nodes) n->client->Shutdown();
}

std::string RedisClusterClient::PrefixedKey(std::string_view key) const {
  return redis_internal::Prefixed(prefix_, key);
}

// ---- Nodes and routing. ----

RedisClusterClient::Node* RedisClusterClient::NodeForLocked(const RedisNodeAddress& address) {
  if (stopping_) return nullptr;
  auto it = nodes_.find(address);
  if (it != nodes_.end()) return it->second.get();
  RedisOptions o = options_;
  o.host = address.host;
  o.port = address.port;
  o.db = 0;
  o.cluster_nodes.clear();
  auto node = std::make_unique<Node>();
  node->address = address;
  node->name = address.ToString();
  node->client = std::make_unique<RedisClientImpl>(o, clock_, nullptr);
  node->breaker_gauge = &metrics_.node_breaker->WithLabels({node->name});
  Node* raw = node.get();
  nodes_.emplace(address, std::move(node));
  return raw;
}

RedisClusterClient::Node* RedisClusterClient::NodeFor(const RedisNodeAddress& address) {
  std::lock_guard<std::mutex> lock(mu_);
  return NodeForLocked(address);
}

RedisClusterClient::Node* RedisClusterClient::NodeForSlot(int slot) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return nullptr;
  Node* owner = owner_[static_cast<size_t>(slot)];
  if (owner != nullptr) return owner;
  // Unknown yet: any node answers, with MOVED if it is not the owner.
  return NodeForLocked(seeds_[next_seed_++ % seeds_.size()]);
}

std::optional<RedisNodeAddress> RedisClusterClient::SlotOwner(int slot) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Node* owner = owner_[static_cast<size_t>(slot)];
  if (owner == nullptr) return std::nullopt;
  return owner->address;
}

std::vector<RedisClusterClient::Node*> RedisClusterClient::MastersLocked() const {
  std::vector<Node*> masters;
  for (Node* n : owner_) {
    if (n != nullptr && (masters.empty() || masters.back() != n) &&
        std::find(masters.begin(), masters.end(), n) == masters.end()) {
      masters.push_back(n);
    }
  }
  return masters;
}

void RedisClusterClient::Route(int slot, std::vector<std::string> argv, int64_t deadline_micros,
                               ReplyHandler handler) {
  auto call = std::make_shared<Call>();
  call->slot = slot;
  call->argv = std::move(argv);
  call->deadline_micros = deadline_micros;
  call->handler = std::move(handler);
  Send(std::move(call));
}

void RedisClusterClient::Send(std::shared_ptr<Call> call) {
  auto finish = [&call](const Status& s) {
    ReplyHandler h = std::move(call->handler);
    call->handler = nullptr;
    h(nullptr, s);
  };
  if (clock_.NowMicros() >= call->deadline_micros) {
    return finish(Status::DeadlineExceeded(
        "redis command timed out after " + std::to_string(options_.command_timeout_millis) +
        " ms (after " + std::to_string(call->redirects) + " redirects)"));
  }
  Node* node = call->ask_node;
  const bool asking = node != nullptr;
  call->ask_node = nullptr;
  if (node == nullptr) node = NodeForSlot(call->slot);
  if (node == nullptr) return finish(Status::Unavailable("redis client shut down"));
  // The argv stays with the call for a redirect's retry; the node gets a copy.
  node->client->SubmitRaw(
      call->argv, call->deadline_micros, asking,
      [this, call, node](const redisReply* r, const Status& s) { OnReply(call, node, r, s); });
}

void RedisClusterClient::OnReply(const std::shared_ptr<Call>& call, Node* node,
                                 const redisReply* reply, const Status& status) {
  auto finish = [&call](const redisReply* r, const Status& s) {
    ReplyHandler h = std::move(call->handler);
    call->handler = nullptr;
    h(r, s);
  };
  if (!status.ok()) {
    // The node is unreachable, slow or shunned (circuit open): perhaps it is failing over.
    if (status.code() == Status::Code::kUnavailable ||
        status.code() == Status::Code::kDeadlineExceeded) {
      RequestRefresh(/*urgent=*/true);
    }
    return finish(nullptr, status);
  }
  if (reply->type != REDIS_REPLY_ERROR) return finish(reply, Status::Ok());
  const std::string_view msg = ReplyText(reply);
  if (std::optional<RedisRedirect> redirect = ParseRedisRedirect(msg, node->address)) {
    if (call->redirects >= options_.cluster_max_redirects) {
      return finish(nullptr,
                    Status::Unavailable("redis cluster: more than " +
                                        std::to_string(options_.cluster_max_redirects) +
                                        " redirects for slot " + std::to_string(call->slot) +
                                        " (last: " + std::string(msg) + ")"));
    }
    ++call->redirects;
    Node* target = NodeFor(redirect->target);
    if (target == nullptr) return finish(nullptr, Status::Unavailable("redis client shut down"));
    if (redirect->kind == RedisRedirect::Kind::kMoved) {
      moved_.fetch_add(1, std::memory_order_relaxed);
      metrics_.moved->Inc();
      {
        std::lock_guard<std::mutex> lock(mu_);
        owner_[static_cast<size_t>(redirect->slot)] = target;
      }
      RequestRefresh(/*urgent=*/true);  // One slot moved: others likely did too.
    } else {
      ask_.fetch_add(1, std::memory_order_relaxed);
      metrics_.ask->Inc();
      call->ask_node = target;
    }
    return Send(call);
  }
  if (msg.starts_with("CLUSTERDOWN")) RequestRefresh(/*urgent=*/true);
  bool outage = false;
  finish(nullptr, ErrorReplyStatus(msg, &outage));
}

void RedisClusterClient::Count(Op op, int64_t start_micros, const Status& status) {
  Outcome outcome = Outcome::kOk;
  if (status.code() == Status::Code::kDeadlineExceeded) {
    outcome = Outcome::kTimeout;
  } else if (status.code() == Status::Code::kUnavailable &&
             (status.message() == "redis circuit open" ||
              status.message().starts_with("redis queue full") ||
              status.message() == "redis client shut down")) {
    outcome = Outcome::kRejected;
  } else if (!status.ok()) {
    outcome = Outcome::kError;
  }
  const auto o = static_cast<size_t>(op);
  metrics_.commands[o][static_cast<size_t>(outcome)]->Inc();
  if (outcome != Outcome::kRejected) {
    metrics_.duration[o]->Observe(static_cast<double>(clock_.NowMicros() - start_micros) / 1e6);
  }
}

// ---- Slot map. ----

void RedisClusterClient::RequestRefresh(bool urgent) {
  auto fetch = std::make_shared<Fetch>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || refreshing_) return;
    const int64_t now = clock_.NowMicros();
    const int64_t interval_millis = urgent ? options_.cluster_refresh_min_interval_millis
                                           : options_.cluster_topology_refresh_millis;
    if (refreshed_once_ && now - last_refresh_micros_ < interval_millis * 1000) return;
    refreshing_ = true;
    refreshed_once_ = true;
    last_refresh_micros_ = now;
    fetch->candidates = RefreshCandidatesLocked();
  }
  fetch->periodic = true;
  FetchStep(std::move(fetch));
}

void RedisClusterClient::RefreshTopology(std::function<void(Status)> done) {
  auto fetch = std::make_shared<Fetch>();
  fetch->done = std::move(done);
  {
    std::lock_guard<std::mutex> lock(mu_);
    fetch->candidates = RefreshCandidatesLocked();
  }
  FetchStep(std::move(fetch));
}

std::vector<RedisNodeAddress> RedisClusterClient::RefreshCandidatesLocked() const {
  // The masters know the map best and are connected already; then the configured seeds;
  // the replicas last (a failover may have left only them).
  std::vector<RedisNodeAddress> out;
  auto add = [&out](const RedisNodeAddress& a) {
    if (std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);
  };
  for (const Node* n : MastersLocked()) add(n->address);
  for (const auto& a : seeds_) add(a);
  for (const auto& a : replicas_) add(a);
  return out;
}

void RedisClusterClient::FetchStep(std::shared_ptr<Fetch> fetch) {
  if (fetch->next >= fetch->candidates.size()) return EndFetch(fetch, fetch->last_error);
  Node* node = NodeFor(fetch->candidates[fetch->next++]);
  if (node == nullptr) return EndFetch(fetch, Status::Unavailable("redis client shut down"));
  node->client->SubmitRaw(
      {"CLUSTER", "SLOTS"}, clock_.NowMicros() + options_.command_timeout_millis * 1000,
      /*asking=*/false, [this, fetch, node](const redisReply* r, const Status& s) {
        Status st = s;
        if (st.ok() && r->type == REDIS_REPLY_ERROR) {
          bool outage = false;
          st = ErrorReplyStatus(ReplyText(r), &outage);
        } else if (st.ok()) {
          Result<std::vector<RedisSlotRange>> ranges = ParseClusterSlots(r, node->address);
          if (ranges.ok() && !ranges->empty()) {
            Install(*ranges, node->address);
            return EndFetch(fetch, Status::Ok());
          }
          st = ranges.ok() ? Status::Unavailable("redis cluster: " + node->name +
                                                 " serves no slots (not a cluster yet?)")
                           : ranges.status();
        }
        fetch->last_error =
            Status(st.code(), "redis cluster: slot map from " + node->name + ": " + st.message());
        FetchStep(fetch);
      });
}

void RedisClusterClient::EndFetch(const std::shared_ptr<Fetch>& fetch, const Status& status) {
  if (status.ok()) {
    refreshes_.fetch_add(1, std::memory_order_relaxed);
    metrics_.refresh_ok->Inc();
  } else {
    refresh_failures_.fetch_add(1, std::memory_order_relaxed);
    metrics_.refresh_error->Inc();
  }
  if (fetch->periodic) {
    std::lock_guard<std::mutex> lock(mu_);
    refreshing_ = false;
  }
  if (fetch->done) {
    auto d = std::move(fetch->done);
    fetch->done = nullptr;
    d(status);
  }
}

void RedisClusterClient::Install(const std::vector<RedisSlotRange>& ranges,
                                 const RedisNodeAddress& from) {
  std::vector<std::string> names;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    std::array<Node*, kRedisClusterSlots> owners{};
    std::vector<RedisNodeAddress> replicas;
    for (const RedisSlotRange& range : ranges) {
      Node* master = NodeForLocked(range.master);
      if (master == nullptr) return;
      for (int slot = range.first; slot <= range.last; ++slot) {
        owners[static_cast<size_t>(slot)] = master;
      }
      for (const auto& r : range.replicas) {
        if (std::find(replicas.begin(), replicas.end(), r) == replicas.end()) {
          replicas.push_back(r);
        }
      }
    }
    owner_ = owners;
    replicas_ = std::move(replicas);
    for (const Node* n : MastersLocked()) names.push_back(n->name);
    std::sort(names.begin(), names.end());
    if (names == master_names_) return;
    master_names_ = names;
  }
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
  spdlog::info("redis cluster: slot map from {}: {} masters ({})", from.ToString(), names.size(),
               list);
}

void RedisClusterClient::UpdateGauges() {
  std::lock_guard<std::mutex> lock(mu_);
  int worst = 0;
  const std::vector<Node*> masters = MastersLocked();
  for (const auto& [address, node] : nodes_) {
    const int rank = BreakerRank(node->client->breaker_state());
    node->breaker_gauge->Set(rank);
  }
  for (const Node* n : masters) worst = std::max(worst, BreakerRank(n->client->breaker_state()));
  metrics_.breaker_state->Set(worst);
  metrics_.masters->Set(static_cast<double>(masters.size()));
}

RedisClient::BreakerState RedisClusterClient::breaker_state() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Node*> nodes = MastersLocked();
  if (nodes.empty()) {
    for (const auto& a : seeds_) {
      if (auto it = nodes_.find(a); it != nodes_.end()) nodes.push_back(it->second.get());
    }
  }
  BreakerState worst = BreakerState::kClosed;
  for (const Node* n : nodes) {
    const BreakerState s = n->client->breaker_state();
    if (BreakerRank(s) > BreakerRank(worst)) worst = s;
  }
  return worst;
}

RedisClient::Stats RedisClusterClient::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  Stats total;
  for (const auto& [address, node] : nodes_) {
    const Stats s = node->client->stats();
    total.round_trips += s.round_trips;
    total.commands_sent += s.commands_sent;
    total.connects += s.connects;
  }
  return total;
}

RedisClusterClient::ClusterStats RedisClusterClient::cluster_stats() const {
  ClusterStats s;
  s.moved = moved_.load(std::memory_order_relaxed);
  s.ask = ask_.load(std::memory_order_relaxed);
  s.refreshes = refreshes_.load(std::memory_order_relaxed);
  s.refresh_failures = refresh_failures_.load(std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(mu_);
  s.nodes = nodes_.size();
  return s;
}

// ---- Public calls. ----

void RedisClusterClient::MultiGet(std::vector<std::string> keys,
                                  std::function<void(Result<Values>)> done) {
  if (keys.empty()) {
    done(Values{});
    return;
  }
  RequestRefresh(/*urgent=*/false);
  const int64_t start = clock_.NowMicros();
  const int64_t deadline = start + options_.command_timeout_millis * 1000;
  // Positions grouped by slot, in the keys' order within each slot.
  std::vector<std::pair<int, size_t>> order;
  order.reserve(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    keys[i] = PrefixedKey(keys[i]);
    order.emplace_back(RedisKeySlot(keys[i]), i);
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  auto join = std::make_shared<MgetJoin>();
  join->values.resize(keys.size());
  join->start_micros = start;
  join->done = std::move(done);
  std::vector<std::pair<int, std::vector<size_t>>> groups;
  for (const auto& [slot, index] : order) {
    if (groups.empty() || groups.back().first != slot) groups.push_back({slot, {}});
    groups.back().second.push_back(index);
  }
  join->parts = groups.size();
  join->remaining = groups.size();
  for (auto& [slot, positions] : groups) {
    std::vector<std::string> argv;
    argv.reserve(positions.size() + 1);
    argv.emplace_back("MGET");
    for (size_t p : positions) argv.push_back(std::move(keys[p]));
    Route(slot, std::move(argv), deadline,
          [this, join, positions = std::move(positions)](const redisReply* r, const Status& s) {
            Result<Values> part =
                s.ok() ? redis_internal::MgetValues(r, positions.size()) : Result<Values>(s);
            std::function<void(Result<Values>)> d;
            Result<Values> result = Status::Internal("unset");
            Status overall;
            bool partial = false;
            {
              std::lock_guard<std::mutex> lock(join->mu);
              if (part.ok()) {
                for (size_t i = 0; i < positions.size(); ++i) {
                  join->values[positions[i]] = std::move((*part)[i]);
                }
              } else {
                ++join->failed;
                if (join->first_error.ok()) join->first_error = part.status();
              }
              if (--join->remaining > 0) return;
              d = std::move(join->done);
              join->done = nullptr;
              if (join->failed == join->parts) {
                overall = join->first_error;
                result = join->first_error;
              } else {
                // The failed slots' keys stay nullopt: misses, recomputed by the caller.
                partial = join->failed > 0;
                result = std::move(join->values);
              }
            }
            if (partial) metrics_.partial_mgets->Inc();
            Count(Op::kMget, join->start_micros, overall);
            d(std::move(result));
          });
  }
}

void RedisClusterClient::Get(std::string key,
                             std::function<void(Result<std::optional<std::string>>)> done) {
  RequestRefresh(/*urgent=*/false);
  const int64_t start = clock_.NowMicros();
  std::string k = PrefixedKey(key);
  const int slot = RedisKeySlot(k);
  Route(slot, {"GET", std::move(k)}, start + options_.command_timeout_millis * 1000,
        [this, start, done = std::move(done)](const redisReply* r, const Status& s) {
          Result<std::optional<std::string>> v =
              s.ok() ? redis_internal::GetValue(r) : Result<std::optional<std::string>>(s);
          Count(Op::kGet, start, v.status());
          done(std::move(v));
        });
}

void RedisClusterClient::Set(std::string key, std::string value, int64_t ttl_seconds,
                             std::function<void(Status)> done) {
  RequestRefresh(/*urgent=*/false);
  if (ttl_seconds <= 0) ttl_seconds = options_.entry_ttl_seconds;
  const int64_t start = clock_.NowMicros();
  std::string k = PrefixedKey(key);
  const int slot = RedisKeySlot(k);
  std::vector<std::string> argv{"SET", std::move(k), std::move(value)};
  if (ttl_seconds > 0) {
    argv.emplace_back("EX");
    argv.push_back(std::to_string(ttl_seconds));
  }
  Route(slot, std::move(argv), start + options_.command_timeout_millis * 1000,
        [this, start, done = std::move(done)](const redisReply* r, const Status& s) {
          const Status result = s.ok() ? redis_internal::SetOk(r) : s;
          Count(Op::kSet, start, result);
          if (done) done(result);
        });
}

void RedisClusterClient::TryLock(std::string key, std::string token, int64_t ttl_millis,
                                 std::function<void(Result<bool>)> done) {
  if (ttl_millis <= 0) {
    // A lock without expiry would outlive a crashed owner forever.
    done(Status::InvalidArgument("redis TryLock: ttl_millis must be > 0"));
    return;
  }
  RequestRefresh(/*urgent=*/false);
  const int64_t start = clock_.NowMicros();
  std::string k = PrefixedKey(key);
  const int slot = RedisKeySlot(k);
  Route(slot, {"SET", std::move(k), std::move(token), "NX", "PX", std::to_string(ttl_millis)},
        start + options_.command_timeout_millis * 1000,
        [this, start, done = std::move(done)](const redisReply* r, const Status& s) {
          Result<bool> held = s.ok() ? redis_internal::TryLockHeld(r) : Result<bool>(s);
          Count(Op::kTryLock, start, held.status());
          done(std::move(held));
        });
}

void RedisClusterClient::Unlock(std::string key, std::string token,
                                std::function<void(Result<bool>)> done) {
  RequestRefresh(/*urgent=*/false);
  const int64_t start = clock_.NowMicros();
  std::string k = PrefixedKey(key);
  const int slot = RedisKeySlot(k);
  // One key, so the script runs on the key's master (EVAL routes by KEYS[1]).
  Route(slot, {"EVAL", redis_internal::kUnlockScript, "1", std::move(k), std::move(token)},
        start + options_.command_timeout_millis * 1000,
        [this, start, done = std::move(done)](const redisReply* r, const Status& s) {
          Result<bool> deleted = s.ok() ? redis_internal::UnlockDeleted(r) : Result<bool>(s);
          Count(Op::kUnlock, start, deleted.status());
          if (done) done(std::move(deleted));
        });
}

void RedisClusterClient::StreamAppend(std::string key, std::string value, int64_t max_entries,
                                      std::function<void(Result<std::string>)> done) {
  RequestRefresh(/*urgent=*/false);
  const int64_t start = clock_.NowMicros();
  std::string k = PrefixedKey(key);
  const int slot = RedisKeySlot(k);
  Route(slot, redis_internal::StreamAppendArgv(std::move(k), std::move(value), max_entries),
        start + options_.command_timeout_millis * 1000,
        [this, start, done = std::move(done)](const redisReply* r, const Status& s) {
          Result<std::string> id =
              s.ok() ? redis_internal::StreamAppendId(r) : Result<std::string>(s);
          Count(Op::kStreamAppend, start, id.status());
          if (done) done(std::move(id));
        });
}

void RedisClusterClient::StreamRead(std::string key, std::string after_id, int64_t count,
                                    std::function<void(Result<std::vector<StreamEntry>>)> done) {
  using Entries = std::vector<StreamEntry>;
  std::string k = PrefixedKey(key);
  const int slot = RedisKeySlot(k);
  Result<std::vector<std::string>> argv =
      redis_internal::StreamReadArgv(std::move(k), after_id, count);
  if (!argv.ok()) return done(argv.status());
  RequestRefresh(/*urgent=*/false);
  const int64_t start = clock_.NowMicros();
  Route(slot, std::move(argv).value(), start + options_.command_timeout_millis * 1000,
        [this, start, done = std::move(done)](const redisReply* r, const Status& s) {
          Result<Entries> entries = s.ok() ? redis_internal::StreamEntries(r) : Result<Entries>(s);
          Count(Op::kStreamRead, start, entries.status());
          done(std::move(entries));
        });
}

void RedisClusterClient::Ping(std::function<void(Status)> done) {
  const int64_t start = clock_.NowMicros();
  std::vector<Node*> nodes;
  {
    std::lock_guard<std::mutex> lock(mu_);
    nodes = MastersLocked();
    if (nodes.empty() && !stopping_) nodes.push_back(NodeForLocked(seeds_.front()));
  }
  if (nodes.empty()) {
    Count(Op::kPing, start, Status::Unavailable("redis client shut down"));
    return done(Status::Unavailable("redis client shut down"));
  }
  struct Join {
    std::mutex mu;
    size_t remaining;
    Status error;
    std::function<void(Status)> done;
  };
  auto join = std::make_shared<Join>();
  join->remaining = nodes.size();
  join->done = std::move(done);
  const int64_t deadline = start + options_.command_timeout_millis * 1000;
  for (Node* n : nodes) {
    n->client->SubmitRaw({"PING"}, deadline, false,
                         [this, join, start, n](const redisReply* r, const Status& s) {
                           Status st = s;
                           if (st.ok() && r->type == REDIS_REPLY_ERROR) {
                             bool outage = false;
                             st = ErrorReplyStatus(ReplyText(r), &outage);
                           } else if (st.ok()) {
                             st = redis_internal::PingOk(r);
                           }
                           std::function<void(Status)> d;
                           Status result;
                           {
                             std::lock_guard<std::mutex> lock(join->mu);
                             if (!st.ok() && join->error.ok()) {
                               join->error = Status(st.code(), n->name + ": " + st.message());
                             }
                             if (--join->remaining > 0) return;
                             d = std::move(join->done);
                             result = join->error;
                           }
                           Count(Op::kPing, start, result);
                           d(result);
                         });
  }
}

void RedisClusterClient::DeleteByPattern(std::string pattern,
                                         std::function<void(Result<int64_t>)> done) {
  auto job = std::make_shared<DeleteJob>();
  job->pattern = redis_internal::EscapeGlob(prefix_) + pattern;
  job->done = std::move(done);
  job->pending = 1;  // This set-up step, released once every master's scan has started.
  // A fresh map first: the scan must reach every master, one promoted a moment ago included.
  RefreshTopology([this, job](Status s) {
    std::vector<Node*> masters;
    bool complete = true;
    {
      std::lock_guard<std::mutex> lock(mu_);
      masters = MastersLocked();
      complete = std::find(owner_.begin(), owner_.end(), nullptr) == owner_.end();
    }
    if (!s.ok()) {
      job->Fail(s);
    } else if (!complete) {
      job->Fail(
          Status::Unavailable("redis cluster: some slots have no master; not all keys "
                              "could be reached"));
    } else {
      for (Node* m : masters) {
        job->Acquire();
        ScanStep(job, m, "0");
      }
    }
    job->Release();
  });
}

// One SCAN step on one master. Its handler pipelines the UNLINKs of the keys found (one per
// slot: a multi-key UNLINK across slots is refused with CROSSSLOT) and the next SCAN.
void RedisClusterClient::ScanStep(const std::shared_ptr<DeleteJob>& job, Node* node,
                                  std::string cursor) {
  const int64_t start = clock_.NowMicros();
  node->client->SubmitRaw(
      {"SCAN", std::move(cursor), "MATCH", job->pattern, "COUNT", std::to_string(kScanBatch)},
      start + options_.command_timeout_millis * 1000, false,
      [this, job, node, start](const redisReply* r, const Status& s) {
        Status st = s;
        if (st.ok() && r->type == REDIS_REPLY_ERROR) {
          bool outage = false;
          st = ErrorReplyStatus(ReplyText(r), &outage);
        } else if (st.ok() && (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
                               r->element[0]->type != REDIS_REPLY_STRING ||
                               r->element[1]->type != REDIS_REPLY_ARRAY)) {
          st = Status::Internal("redis SCAN: unexpected reply");
        }
        Count(Op::kScan, start, st);
        if (!st.ok()) {
          job->Fail(Status(st.code(), node->name + ": " + st.message()));
          return job->Release();
        }
        std::string next(ReplyText(r->element[0]));
        const redisReply* keys = r->element[1];
        std::map<int, std::vector<std::string>> by_slot;
        for (size_t i = 0; i < keys->elements; ++i) {
          if (keys->element[i]->type != REDIS_REPLY_STRING) continue;
          std::string k(ReplyText(keys->element[i]));
          const int slot = RedisKeySlot(k);
          auto& argv = by_slot[slot];
          if (argv.empty()) argv.emplace_back("UNLINK");
          argv.push_back(std::move(k));
        }
        const int64_t unlink_start = clock_.NowMicros();
        for (auto& [slot, argv] : by_slot) {
          job->Acquire();
          Route(slot, std::move(argv), unlink_start + options_.command_timeout_millis * 1000,
                [this, job, unlink_start](const redisReply* ur, const Status& us) {
                  Status ust = us;
                  if (ust.ok() && ur->type != REDIS_REPLY_INTEGER) {
                    ust = Status::Internal("redis UNLINK: unexpected reply");
                  }
                  Count(Op::kUnlink, unlink_start, ust);
                  if (ust.ok()) {
                    job->Add(ur->integer);
                  } else {
                    job->Fail(ust);
                  }
                  job->Release();
                });
        }
        if (next != "0" && !job->failed()) {
          job->Acquire();
          ScanStep(job, node, std::move(next));
        }
        job->Release();
      });
}

}  // namespace tailcut
