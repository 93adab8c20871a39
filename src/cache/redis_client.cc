#include "cache/redis_client.h"

#include <hiredis/hiredis.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <exception>
#include <system_error>
#include <utility>

namespace tailcut {
namespace {

constexpr const char* kOpNames[] = {"mget",   "get",  "set",  "trylock", "unlock", "scan",
                                    "unlink", "ping", "xadd", "xrange",  "raw"};

struct ReplyDeleter {
  void operator()(redisReply* r) const {
    if (r != nullptr) freeReplyObject(r);
  }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

std::string_view ReplyText(const redisReply* r) {
  return {r->str, static_cast<size_t>(r->len)};
}

// A zero timeval means "block forever" to setsockopt, so the shortest timeout is 1 us.
timeval ToTimeval(int64_t micros) {
  micros = std::max<int64_t>(micros, 1);
  timeval tv;
  tv.tv_sec = static_cast<time_t>(micros / 1'000'000);
  tv.tv_usec = static_cast<suseconds_t>(micros % 1'000'000);
  return tv;
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// A write to a socket the server closed raises SIGPIPE, which kills the process by default.
// hiredis 0.14 uses write(), not send(MSG_NOSIGNAL), and a library must not change the
// process's signal dispositions, so the client thread blocks SIGPIPE for itself (it then
// gets EPIPE) and discards the pending signal after such a write.
void BlockSigpipeOnThisThread() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

void DiscardPendingSigpipe() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  const timespec zero{0, 0};
  while (sigtimedwait(&set, nullptr, &zero) == SIGPIPE) {
  }
}

}  // namespace

namespace redis_internal {

// Compare-and-delete in one server-side step: a GET followed by a DEL from the client could
// delete a lock that expired in between and was taken by someone else.
const char kUnlockScript[] =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) "
    "else return 0 end";

Status ErrorReplyStatus(std::string_view msg, bool* outage) {
  const std::string text = "redis: " + std::string(msg);
  *outage = false;
  if (StartsWith(msg, "NOAUTH") || StartsWith(msg, "WRONGPASS")) {
    *outage = true;
    return Status::Unauthenticated(text);
  }
  if (StartsWith(msg, "NOPERM")) return Status::PermissionDenied(text);
  if (StartsWith(msg, "LOADING") || StartsWith(msg, "BUSY") || StartsWith(msg, "MASTERDOWN") ||
      StartsWith(msg, "TRYAGAIN") || StartsWith(msg, "CLUSTERDOWN")) {
    *outage = true;
    return Status::Unavailable(text);
  }
  return Status::Internal(text);
}

// SCAN MATCH treats these as glob syntax; a prefix containing them must match literally.
std::string EscapeGlob(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

Result<std::vector<std::optional<std::string>>> MgetValues(const redisReply* r, size_t n) {
  if (r->type != REDIS_REPLY_ARRAY || r->elements != n) {
    return Status::Internal("redis MGET: unexpected reply");
  }
  std::vector<std::optional<std::string>> values;
  values.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const redisReply* e = r->element[i];
    if (e->type == REDIS_REPLY_STRING) {
      values.emplace_back(std::string(ReplyText(e)));
    } else if (e->type == REDIS_REPLY_NIL) {
      values.emplace_back(std::nullopt);
    } else {
      return Status::Internal("redis MGET: unexpected element type");
    }
  }
  return values;
}

Result<std::optional<std::string>> GetValue(const redisReply* r) {
  if (r->type == REDIS_REPLY_NIL) return std::optional<std::string>();
  if (r->type != REDIS_REPLY_STRING) return Status::Internal("redis GET: unexpected reply");
  return std::optional<std::string>(std::string(ReplyText(r)));
}

Status SetOk(const redisReply* r) {
  if (r->type != REDIS_REPLY_STATUS || ReplyText(r) != "OK") {
    return Status::Internal("redis SET: unexpected reply");
  }
  return Status::Ok();
}

Result<bool> TryLockHeld(const redisReply* r) {
  if (r->type == REDIS_REPLY_NIL) return false;  // Held by someone else.
  if (r->type == REDIS_REPLY_STATUS && ReplyText(r) == "OK") return true;
  return Status::Internal("redis TryLock: unexpected reply");
}

Result<bool> UnlockDeleted(const redisReply* r) {
  if (r->type != REDIS_REPLY_INTEGER) return Status::Internal("redis Unlock: unexpected reply");
  return r->integer == 1;
}

Status PingOk(const redisReply* r) {
  if (r->type != REDIS_REPLY_STATUS || ReplyText(r) != "PONG") {
    return Status::Internal("redis PING: unexpected reply");
  }
  return Status::Ok();
}

Result<std::string> StreamAppendId(const redisReply* r) {
  if (r->type != REDIS_REPLY_STRING || !ParseStreamId(ReplyText(r))) {
    return Status::Internal("redis XADD: unexpected reply");
  }
  return std::string(ReplyText(r));
}

Result<std::vector<RedisClient::StreamEntry>> StreamEntries(const redisReply* r) {
  // RESP2: [[id, [field, value, field, value...]], ...].
  if (r->type != REDIS_REPLY_ARRAY) return Status::Internal("redis XRANGE: unexpected reply");
  std::vector<RedisClient::StreamEntry> entries;
  entries.reserve(r->elements);
  for (size_t i = 0; i < r->elements; ++i) {
    const redisReply* e = r->element[i];
    if (e == nullptr || e->type != REDIS_REPLY_ARRAY || e->elements != 2 ||
        e->element[0]->type != REDIS_REPLY_STRING || !ParseStreamId(ReplyText(e->element[0]))) {
      return Status::Internal("redis XRANGE: unexpected entry");
    }
    RedisClient::StreamEntry entry;
    entry.id = std::string(ReplyText(e->element[0]));
    const redisReply* fields = e->element[1];
    if (fields->type == REDIS_REPLY_ARRAY) {
      if (fields->elements % 2 != 0) return Status::Internal("redis XRANGE: unexpected fields");
      for (size_t f = 0; f < fields->elements; f += 2) {
        const redisReply* name = fields->element[f];
        const redisReply* value = fields->element[f + 1];
        if (name->type != REDIS_REPLY_STRING || value->type != REDIS_REPLY_STRING) {
          return Status::Internal("redis XRANGE: unexpected fields");
        }
        if (ReplyText(name) == "v") {
          entry.value = std::string(ReplyText(value));
          break;
        }
      }
    } else if (fields->type != REDIS_REPLY_NIL) {
      return Status::Internal("redis XRANGE: unexpected fields");
    }
    entries.push_back(std::move(entry));
  }
  return entries;
}

std::optional<std::pair<uint64_t, uint64_t>> ParseStreamId(std::string_view id) {
  auto number = [](std::string_view digits, uint64_t* out) {
    if (digits.empty()) return false;
    for (char c : digits) {
      if (c < '0' || c > '9') return false;  // from_chars alone would take a leading '-'.
    }
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), *out);
    return ec == std::errc() && end == digits.data() + digits.size();
  };
  std::pair<uint64_t, uint64_t> parsed{0, 0};
  const size_t dash = id.find('-');
  if (!number(id.substr(0, dash), &parsed.first)) return std::nullopt;
  if (dash != std::string_view::npos && !number(id.substr(dash + 1), &parsed.second)) {
    return std::nullopt;
  }
  return parsed;
}

std::vector<std::string> StreamAppendArgv(std::string key, std::string value, int64_t max_entries) {
  std::vector<std::string> argv{"XADD", std::move(key)};
  if (max_entries > 0) {
    // Approximate: Redis trims whole nodes, which costs far less than trimming to the entry.
    argv.insert(argv.end(), {"MAXLEN", "~", std::to_string(max_entries)});
  }
  argv.insert(argv.end(), {"*", "v"});
  argv.push_back(std::move(value));
  return argv;
}

Result<std::vector<std::string>> StreamReadArgv(std::string key, std::string_view after_id,
                                                int64_t count) {
  if (count <= 0) return Status::InvalidArgument("redis StreamRead: count must be > 0");
  if (!after_id.empty() && !ParseStreamId(after_id)) {
    return Status::InvalidArgument("redis StreamRead: malformed stream id '" +
                                   std::string(after_id) + "'");
  }
  // "(id": exclusive (Redis >= 6.2). "-": the smallest id, for a read from the start.
  std::string start = after_id.empty() ? std::string("-") : "(" + std::string(after_id);
  return std::vector<std::string>{"XRANGE", std::move(key), std::move(start),
                                  "+",      "COUNT",        std::to_string(count)};
}

std::string KeyPrefix(const RedisOptions& options) {
  return options.key_prefix.empty() ? "" : options.key_prefix + ":";
}

std::string Prefixed(std::string_view prefix, std::string_view key) {
  std::string k;
  k.reserve(prefix.size() + key.size());
  k.append(prefix).append(key);
  return k;
}

void AddCommandMetrics(MetricsRegistry& registry, std::string_view duration_help,
                       std::span<const char* const> op_names,
                       std::span<std::array<Counter*, 4>> commands,
                       std::span<Histogram*> duration) {
  static constexpr const char* kOutcomes[] = {"ok", "error", "timeout", "rejected"};
  auto& counters = registry.AddCounter(
      "tailcut_redis_commands_total",
      "Redis client calls by command and result (rejected: failed before being sent, because "
      "the circuit was open or the queue full).",
      {"command", "result"});
  auto& histograms =
      registry.AddHistogram("tailcut_redis_command_duration_seconds", std::string(duration_help),
                            LatencyBucketsSeconds(), {"command"});
  for (size_t op = 0; op < op_names.size() && op < commands.size() && op < duration.size(); ++op) {
    for (size_t o = 0; o < 4; ++o)
      commands[op][o] = &counters.WithLabels({op_names[op], kOutcomes[o]});
    duration[op] = &histograms.WithLabels({op_names[op]});
  }
}

}  // namespace redis_internal

using redis_internal::ErrorReplyStatus;
using redis_internal::EscapeGlob;
using redis_internal::kUnlockScript;

// DeleteByPattern's state across its SCAN/UNLINK steps; touched only by their handlers, which
// run one at a time (on the client thread, or on the caller's for a rejected first step).
struct RedisClientImpl::DeleteState {
  std::string pattern;  // Prefixed, ready for SCAN MATCH.
  std::string cursor = "0";
  int64_t deleted = 0;
  Status error;
  std::function<void(Result<int64_t>)> done;

  void Finish() {
    if (!done) return;
    auto d = std::move(done);
    done = nullptr;
    if (error.ok()) {
      d(deleted);
    } else {
      d(error);
    }
  }
};

RedisClientImpl::RedisClientImpl(const RedisOptions& options, const Clock& clock,
                                 MetricsRegistry* metrics)
    : options_(options),
      clock_(clock),
      prefix_(redis_internal::KeyPrefix(options)),
      own_metrics_(metrics == nullptr ? std::make_unique<MetricsRegistry>() : nullptr),
      breaker_(
          CircuitBreakerOptions{options.breaker_failure_threshold, options.breaker_open_millis},
          clock, [this](BreakerState from, BreakerState to) { OnBreakerTransition(from, to); }) {
  MetricsRegistry& registry = metrics != nullptr ? *metrics : *own_metrics_;
  static_assert(std::size(kOpNames) == static_cast<size_t>(Op::kCount));
  static_assert(static_cast<size_t>(Outcome::kCount) == 4);
  redis_internal::AddCommandMetrics(
      registry,
      "Time from a Redis client call to its callback, queueing included (rejected excluded).",
      kOpNames, metrics_.commands, metrics_.duration);
  metrics_.breaker_state =
      &registry
           .AddGauge("tailcut_redis_breaker_state",
                     "Redis circuit breaker state: 0 closed, 1 half-open, 2 open.")
           .Get();
  metrics_.transitions =
      &registry.AddCounter("tailcut_redis_breaker_transitions_total",
                           "Redis circuit breaker transitions, by new state.", {"to"});
  for (auto s : {BreakerState::kClosed, BreakerState::kOpen, BreakerState::kHalfOpen}) {
    metrics_.transitions->WithLabels({std::string(CircuitBreaker::StateName(s))});
  }
  metrics_.queue_depth =
      &registry.AddGauge("tailcut_redis_queue_depth", "Redis commands queued, not yet sent.").Get();
  metrics_.reconnects =
      &registry
           .AddCounter("tailcut_redis_reconnects_total",
                       "Redis connections established after the first (after a loss or failure).")
           .Get();
  thread_ = std::thread([this] { Run(); });
}

RedisClientImpl::~RedisClientImpl() {
  Shutdown();
}

void RedisClientImpl::Shutdown() {
  std::lock_guard<std::mutex> once(shutdown_mu_);
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_.store(true);
  }
  cv_.notify_all();
  {
    // Unblocks a read/write in flight at once instead of after its timeout. Under fd_mu_ the
    // fd cannot be closed (and reused) underneath us; see Connect() for the other half.
    std::lock_guard<std::mutex> lock(fd_mu_);
    if (active_fd_ >= 0) shutdown(active_fd_, SHUT_RDWR);
  }
  thread_.join();
}

std::string RedisClientImpl::PrefixedKey(std::string_view key) const {
  return redis_internal::Prefixed(prefix_, key);
}

RedisClient::Stats RedisClientImpl::stats() const {
  Stats s;
  s.round_trips = round_trips_.load(std::memory_order_relaxed);
  s.commands_sent = commands_sent_.load(std::memory_order_relaxed);
  s.connects = connects_.load(std::memory_order_relaxed);
  return s;
}

// ---- Public calls: build argv and a typed reply handler. ----

void RedisClientImpl::MultiGet(
    std::vector<std::string> keys,
    std::function<void(Result<std::vector<std::optional<std::string>>>)> done) {
  using Values = std::vector<std::optional<std::string>>;
  if (keys.empty()) {
    done(Values{});
    return;
  }
  std::vector<std::string> argv;
  argv.reserve(keys.size() + 1);
  argv.emplace_back("MGET");
  for (const std::string& k : keys) argv.push_back(PrefixedKey(k));
  const size_t n = keys.size();
  Submit(Op::kMget, std::move(argv),
         [n, done = std::move(done)](const redisReply* r, const Status& s) {
           if (!s.ok()) return done(s);
           done(redis_internal::MgetValues(r, n));
         });
}

void RedisClientImpl::Get(std::string key,
                          std::function<void(Result<std::optional<std::string>>)> done) {
  Submit(Op::kGet, {"GET", PrefixedKey(key)},
         [done = std::move(done)](const redisReply* r, const Status& s) {
           if (!s.ok()) return done(s);
           done(redis_internal::GetValue(r));
         });
}

void RedisClientImpl::Set(std::string key, std::string value, int64_t ttl_seconds,
                          std::function<void(Status)> done) {
  if (ttl_seconds <= 0) ttl_seconds = options_.entry_ttl_seconds;
  std::vector<std::string> argv{"SET", PrefixedKey(key), std::move(value)};
  if (ttl_seconds > 0) {
    argv.emplace_back("EX");
    argv.push_back(std::to_string(ttl_seconds));
  }
  Submit(Op::kSet, std::move(argv), [done = std::move(done)](const redisReply* r, const Status& s) {
    if (!done) return;
    done(s.ok() ? redis_internal::SetOk(r) : s);
  });
}

void RedisClientImpl::TryLock(std::string key, std::string token, int64_t ttl_millis,
                              std::function<void(Result<bool>)> done) {
  if (ttl_millis <= 0) {
    // A lock without expiry would outlive a crashed owner forever.
    done(Status::InvalidArgument("redis TryLock: ttl_millis must be > 0"));
    return;
  }
  Submit(Op::kTryLock,
         {"SET", PrefixedKey(key), std::move(token), "NX", "PX", std::to_string(ttl_millis)},
         [done = std::move(done)](const redisReply* r, const Status& s) {
           if (!s.ok()) return done(s);
           done(redis_internal::TryLockHeld(r));
         });
}

void RedisClientImpl::Unlock(std::string key, std::string token,
                             std::function<void(Result<bool>)> done) {
  Submit(Op::kUnlock, {"EVAL", kUnlockScript, "1", PrefixedKey(key), std::move(token)},
         [done = std::move(done)](const redisReply* r, const Status& s) {
           if (!done) return;
           if (!s.ok()) return done(s);
           done(redis_internal::UnlockDeleted(r));
         });
}

void RedisClientImpl::Ping(std::function<void(Status)> done) {
  Submit(Op::kPing, {"PING"}, [done = std::move(done)](const redisReply* r, const Status& s) {
    done(s.ok() ? redis_internal::PingOk(r) : s);
  });
}

void RedisClientImpl::StreamAppend(std::string key, std::string value, int64_t max_entries,
                                   std::function<void(Result<std::string>)> done) {
  Submit(Op::kStreamAppend,
         redis_internal::StreamAppendArgv(PrefixedKey(key), std::move(value), max_entries),
         [done = std::move(done)](const redisReply* r, const Status& s) {
           if (!done) return;
           if (!s.ok()) return done(s);
           done(redis_internal::StreamAppendId(r));
         });
}

void RedisClientImpl::StreamRead(std::string key, std::string after_id, int64_t count,
                                 std::function<void(Result<std::vector<StreamEntry>>)> done) {
  Result<std::vector<std::string>> argv =
      redis_internal::StreamReadArgv(PrefixedKey(key), after_id, count);
  if (!argv.ok()) return done(argv.status());
  Submit(Op::kStreamRead, std::move(argv).value(),
         [done = std::move(done)](const redisReply* r, const Status& s) {
           if (!s.ok()) return done(s);
           done(redis_internal::StreamEntries(r));
         });
}

void RedisClientImpl::DeleteByPattern(std::string pattern,
                                      std::function<void(Result<int64_t>)> done) {
  auto state = std::make_shared<DeleteState>();
  state->pattern = EscapeGlob(prefix_) + pattern;
  state->done = std::move(done);
  // The first step is the caller's command (breaker, queue bound); later ones are follow-ups.
  ScanStep(std::move(state), /*internal=*/false);
}

// One SCAN step. Its handler pipelines the UNLINK of the keys found and the next SCAN into the
// next round; the chain finishes in exactly one place: the last SCAN's handler when it found
// nothing, else the last UNLINK's, or the first handler to see a failure.
void RedisClientImpl::ScanStep(std::shared_ptr<DeleteState> state, bool internal) {
  std::vector<std::string> argv{"SCAN",         state->cursor, "MATCH",
                                state->pattern, "COUNT",       std::to_string(kScanBatch)};
  Submit(
      Op::kScan, std::move(argv),
      [this, state](const redisReply* r, const Status& s) {
        if (!s.ok() && state->error.ok()) state->error = s;
        if (!state->error.ok()) return state->Finish();  // This step or an UNLINK failed.
        if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
            r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_ARRAY) {
          state->error = Status::Internal("redis SCAN: unexpected reply");
          return state->Finish();
        }
        state->cursor = std::string(ReplyText(r->element[0]));
        const bool last = state->cursor == "0";
        const redisReply* keys = r->element[1];
        if (keys->elements > 0) {
          std::vector<std::string> unlink;
          unlink.reserve(keys->elements + 1);
          unlink.emplace_back("UNLINK");  // Frees memory off Redis's main thread, unlike DEL.
          for (size_t i = 0; i < keys->elements; ++i) {
            if (keys->element[i]->type == REDIS_REPLY_STRING) {
              unlink.emplace_back(ReplyText(keys->element[i]));
            }
          }
          Submit(
              Op::kUnlink, std::move(unlink),
              [state, last](const redisReply* ur, const Status& us) {
                if (us.ok() && ur->type == REDIS_REPLY_INTEGER) {
                  state->deleted += ur->integer;
                } else if (state->error.ok()) {
                  state->error = us.ok() ? Status::Internal("redis UNLINK: unexpected reply") : us;
                }
                if (last) state->Finish();
              },
              /*internal=*/true);
        }
        if (!last) {
          ScanStep(state, /*internal=*/true);
        } else if (keys->elements == 0) {
          state->Finish();
        }
      },
      internal);
}

// ---- Queueing and completion. ----

void RedisClientImpl::SubmitRaw(std::vector<std::string> argv, int64_t deadline_micros, bool asking,
                                ReplyHandler handler) {
  Command cmd{Op::kRaw, std::move(argv), clock_.NowMicros(), deadline_micros, std::move(handler)};
  cmd.raw = true;
  cmd.asking = asking;
  Enqueue(std::move(cmd), /*internal=*/false);
}

void RedisClientImpl::Submit(Op op, std::vector<std::string> argv, ReplyHandler handler,
                             bool internal) {
  const int64_t now = clock_.NowMicros();
  Enqueue(Command{op, std::move(argv), now, now + options_.command_timeout_millis * 1000,
                  std::move(handler)},
          internal);
}

void RedisClientImpl::Enqueue(Command cmd, bool internal) {
  if (!internal && !breaker_.Allow()) {
    Complete(cmd, nullptr, Status::Unavailable("redis circuit open"), Outcome::kRejected);
    return;
  }
  enum { kQueued, kShutDown, kFull } verdict = kQueued;
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_.load(std::memory_order_relaxed)) {
      verdict = kShutDown;
    } else if (!internal && queue_.size() >= options_.max_queued_commands) {
      verdict = kFull;
    } else {
      queue_.push_back(std::move(cmd));
      metrics_.queue_depth->Set(static_cast<double>(queue_.size()));
      wake = waiting_;  // A busy client thread will find it; don't pay for a futex wake.
    }
  }
  // Rejections complete outside the lock: the callback may call us again.
  if (verdict == kShutDown) {
    Complete(cmd, nullptr, Status::Unavailable("redis client shut down"), Outcome::kRejected);
    return;
  }
  if (verdict == kFull) {
    Complete(cmd, nullptr,
             Status::Unavailable("redis queue full (" +
                                 std::to_string(options_.max_queued_commands) + " commands)"),
             Outcome::kRejected);
    return;
  }
  if (wake) cv_.notify_one();
}

void RedisClientImpl::Complete(Command& cmd, const redisReply* reply, const Status& status,
                               Outcome outcome) {
  const auto op = static_cast<size_t>(cmd.op);
  metrics_.commands[op][static_cast<size_t>(outcome)]->Inc();
  if (outcome != Outcome::kRejected) {
    metrics_.duration[op]->Observe(static_cast<double>(clock_.NowMicros() - cmd.enqueue_micros) /
                                   1e6);
  }
  // Moved out first: whatever happens in it, this command's handler can never run again.
  ReplyHandler handler = std::move(cmd.handler);
  cmd.handler = nullptr;
  if (!handler) return;
  try {
    handler(reply, status);
  } catch (const std::exception& e) {
    // A throwing callback must not take the client thread (and every later callback) down.
    spdlog::error("redis client: callback for {} threw: {}", kOpNames[op], e.what());
  } catch (...) {
    spdlog::error("redis client: callback for {} threw", kOpNames[op]);
  }
}

void RedisClientImpl::FailAll(std::vector<Command>& cmds, size_t from, const Status& status,
                              Outcome outcome) {
  for (size_t i = from; i < cmds.size(); ++i) Complete(cmds[i], nullptr, status, outcome);
}

void RedisClientImpl::OnBreakerTransition(BreakerState from, BreakerState to) {
  metrics_.breaker_state->Set(to == BreakerState::kClosed     ? 0
                              : to == BreakerState::kHalfOpen ? 1
                                                              : 2);
  metrics_.transitions->WithLabels({std::string(CircuitBreaker::StateName(to))}).Inc();
  if (to == BreakerState::kOpen && from == BreakerState::kClosed) {
    spdlog::warn("redis {}:{}: circuit open, L2 cache bypassed; probing every {} ms", options_.host,
                 options_.port, options_.breaker_open_millis);
  } else if (to == BreakerState::kClosed) {
    spdlog::info("redis {}:{}: circuit closed, L2 cache back in use", options_.host, options_.port);
  }
}

// ---- Client thread. ----

void RedisClientImpl::Run() {
  BlockSigpipeOnThisThread();
  std::vector<Command> round;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_.load(std::memory_order_relaxed)) {
    if (breaker_.state() == BreakerState::kOpen) {
      // Probe by ourselves once the open period is over, so that the breaker closes again
      // without a caller having to spend a request (and possibly a timeout) on the probe.
      const int64_t wait_micros = breaker_.ProbeAtMicros() - clock_.NowMicros();
      if (wait_micros <= 0 && breaker_.Allow()) {
        const int64_t now = clock_.NowMicros();
        queue_.push_back(Command{Op::kPing,
                                 {"PING"},
                                 now,
                                 now + options_.command_timeout_millis * 1000,
                                 [](const redisReply*, const Status&) {}});
      } else if (queue_.empty()) {
        waiting_ = true;
        cv_.wait_for(lock, std::chrono::microseconds(std::max<int64_t>(wait_micros, 1000)));
        waiting_ = false;
        continue;
      }
    }
    if (queue_.empty()) {
      waiting_ = true;
      cv_.wait(lock);
      waiting_ = false;
      continue;
    }
    round.swap(queue_);
    metrics_.queue_depth->Set(0);
    lock.unlock();
    RunRound(round);
    round.clear();
    lock.lock();
  }
  // Submit() rejects everything once stopping_ is set (under mu_), so this is the last of it.
  round.swap(queue_);
  metrics_.queue_depth->Set(0);
  lock.unlock();
  FailAll(round, 0, Status::Unavailable("redis client shut down"), Outcome::kError);
  DropConnection();
}

void RedisClientImpl::RunRound(std::vector<Command>& cmds) {
  const int64_t now = clock_.NowMicros();
  // Commands already due are not sent: they would only load a server that is behind.
  size_t live = 0;
  for (size_t i = 0; i < cmds.size(); ++i) {
    if (cmds[i].deadline_micros <= now) {
      Complete(cmds[i], nullptr,
               Status::DeadlineExceeded("redis command timed out after " +
                                        std::to_string(options_.command_timeout_millis) +
                                        " ms (while queued)"),
               Outcome::kTimeout);
    } else {
      if (live != i) cmds[live] = std::move(cmds[i]);
      ++live;
    }
  }
  cmds.erase(cmds.begin() + static_cast<ptrdiff_t>(live), cmds.end());
  if (cmds.empty()) return;

  // due[i]: when reply i must be in, for command i and all behind it to meet their deadlines
  // (follow-ups queued later can have earlier deadlines than commands ahead of them).
  std::vector<int64_t> due(cmds.size());
  int64_t earliest = cmds.back().deadline_micros;
  for (size_t i = cmds.size(); i-- > 0;) {
    earliest = std::min(earliest, cmds[i].deadline_micros);
    due[i] = earliest;
  }

  // On failure paths the breaker is told before the callbacks run, so that a caller reacting
  // to the error (retry, next request) already sees the new state.
  const BreakerState breaker = breaker_.state();
  if (breaker == BreakerState::kOpen) {
    // Queued before the breaker opened; fail them now rather than feed a sick server.
    FailAll(cmds, 0, Status::Unavailable("redis circuit open"), Outcome::kRejected);
    return;
  }
  if (ctx_ == nullptr) {
    // Half-open rounds carry the probe; the breaker already paces those, so no backoff.
    if (breaker != BreakerState::kHalfOpen && now < next_connect_micros_) {
      breaker_.RecordFailure();
      FailAll(cmds, 0,
              Status(last_failure_.code(), last_failure_.message() + " (reconnect backing off)"),
              Outcome::kError);
      return;
    }
    Status s = Connect(earliest);
    if (!s.ok()) {
      breaker_.RecordFailure();
      FailAll(cmds, 0, s, Outcome::kError);
      return;
    }
  }

  // One pipeline: the handshake of a new connection, then every command.
  std::vector<std::vector<std::string>> handshake;
  if (!handshake_done_) {
    if (!options_.password.empty()) {
      if (options_.username.empty()) {
        handshake.push_back({"AUTH", options_.password});
      } else {
        handshake.push_back({"AUTH", options_.username, options_.password});
      }
    }
    if (options_.db != 0) handshake.push_back({"SELECT", std::to_string(options_.db)});
  }
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  Status io;
  auto append = [&](const std::vector<std::string>& args) {
    argv.clear();
    lens.clear();
    for (const std::string& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    if (io.ok() && redisAppendCommandArgv(ctx_, static_cast<int>(args.size()), argv.data(),
                                          lens.data()) != REDIS_OK) {
      io = Status::Internal("redis: cannot format command (out of memory)");
    }
  };
  static const std::vector<std::string> kAsking{"ASKING"};
  for (const auto& h : handshake) append(h);
  for (const Command& c : cmds) {
    if (c.asking) append(kAsking);
    append(c.argv);
  }
  round_trips_.fetch_add(1, std::memory_order_relaxed);
  commands_sent_.fetch_add(cmds.size(), std::memory_order_relaxed);

  if (io.ok()) io = Flush(earliest);
  for (size_t i = 0; i < handshake.size() && io.ok(); ++i) {
    redisReply* raw = nullptr;
    io = ReadReply(earliest, &raw);
    ReplyPtr reply(raw);
    if (io.ok() && reply->type == REDIS_REPLY_ERROR) {
      // The connection works but can't be used: fail the round, retry with backoff.
      // Redis's messages never echo the password.
      Status failed =
          handshake[i][0] == "AUTH"
              ? Status::Unauthenticated(
                    "redis AUTH" +
                    (options_.username.empty() ? "" : " as user '" + options_.username + "'") +
                    " failed: " + std::string(ReplyText(reply.get())))
              : Status::InvalidArgument("redis SELECT " + std::to_string(options_.db) +
                                        " failed: " + std::string(ReplyText(reply.get())));
      DropConnection();
      BackOff(failed);
      ReportDown(failed);
      breaker_.RecordFailure();
      FailAll(cmds, 0, failed, Outcome::kError);
      return;
    }
  }
  if (io.ok()) handshake_done_ = true;

  size_t next = 0;
  bool outage = false;
  for (; next < cmds.size() && io.ok(); ++next) {
    redisReply* raw = nullptr;
    if (cmds[next].asking) {
      // ASKING's +OK (an error would show again as the command's own ASK or MOVED reply).
      io = ReadReply(due[next], &raw);
      if (!io.ok()) break;
      freeReplyObject(raw);
      raw = nullptr;
    }
    io = ReadReply(due[next], &raw);
    if (!io.ok()) break;
    ReplyPtr reply(raw);
    if (reply->type == REDIS_REPLY_ERROR) {
      bool is_outage = false;
      Status s = ErrorReplyStatus(ReplyText(reply.get()), &is_outage);
      outage = outage || is_outage;
      if (cmds[next].raw) {
        Complete(cmds[next], reply.get(), Status::Ok(), Outcome::kError);
      } else {
        Complete(cmds[next], nullptr, s, Outcome::kError);
      }
    } else {
      Complete(cmds[next], reply.get(), Status::Ok(), Outcome::kOk);
    }
  }
  if (!io.ok()) {
    // The connection is out of step with the commands (or gone): drop it. The next round
    // reconnects at once; a server that is really down fails that connect and backs off.
    DropConnection();
    const bool timeout = io.code() == Status::Code::kDeadlineExceeded;
    if (stopping_.load(std::memory_order_relaxed)) {
      io = Status::Unavailable("redis client shut down");
    }
    ReportDown(io);
    breaker_.RecordFailure();
    FailAll(cmds, next, io, timeout ? Outcome::kTimeout : Outcome::kError);
    return;
  }
  reconnect_delay_millis_ = 0;
  if (outage) {
    breaker_.RecordFailure();
  } else {
    breaker_.RecordSuccess();
    if (reported_down_) {
      spdlog::info("redis {}:{}: working again", options_.host, options_.port);
      reported_down_ = false;
    }
  }
}

Status RedisClientImpl::Connect(int64_t deadline_micros) {
  const int64_t budget =
      std::min(options_.connect_timeout_millis * 1000, deadline_micros - clock_.NowMicros());
  redisContext* c =
      redisConnectWithTimeout(options_.host.c_str(), options_.port, ToTimeval(budget));
  if (c == nullptr || c->err != 0) {
    Status failed = Status::Unavailable(
        "redis connect to " + options_.host + ":" + std::to_string(options_.port) +
        " failed: " + (c != nullptr ? std::string(c->errstr) : std::string("out of memory")));
    if (c != nullptr) redisFree(c);
    BackOff(failed);
    ReportDown(failed);
    return failed;
  }
  // Keepalive notices a peer that vanished without a FIN (host crash, NAT drop) on an idle
  // connection; the default timeout is a fallback, refined before every read and write.
  redisEnableKeepAlive(c);
  redisSetTimeout(c, ToTimeval(options_.command_timeout_millis * 1000));
  ctx_ = c;
  handshake_done_ = false;
  connects_.fetch_add(1, std::memory_order_relaxed);
  if (connected_before_) metrics_.reconnects->Inc();
  connected_before_ = true;
  {
    // Either the destructor, which sets stopping_ before taking fd_mu_, sees this fd, or we
    // see stopping_ here; both ways a blocked read is cut short.
    std::lock_guard<std::mutex> lock(fd_mu_);
    active_fd_ = c->fd;
    if (stopping_.load()) shutdown(c->fd, SHUT_RDWR);
  }
  return Status::Ok();
}

void RedisClientImpl::DropConnection() {
  if (ctx_ == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(fd_mu_);
    active_fd_ = -1;
  }
  redisFree(ctx_);
  ctx_ = nullptr;
  handshake_done_ = false;
}

void RedisClientImpl::BackOff(const Status& failure) {
  reconnect_delay_millis_ =
      reconnect_delay_millis_ == 0
          ? options_.reconnect_backoff_min_millis
          : std::min(reconnect_delay_millis_ * 2, options_.reconnect_backoff_max_millis);
  next_connect_micros_ = clock_.NowMicros() + reconnect_delay_millis_ * 1000;
  last_failure_ = failure;
}

void RedisClientImpl::ReportDown(const Status& failure) {
  // Once per outage: a dead server would otherwise log on every round.
  if (reported_down_ || stopping_.load(std::memory_order_relaxed)) return;
  reported_down_ = true;
  spdlog::warn("redis {}:{}: {} (further failures not logged until it works again)", options_.host,
               options_.port, failure.ToString());
}

// hiredis's redisGetReply() loops over read()/write() with one fixed socket timeout, so a
// server trickling bytes could stretch a round far past its deadline. These loops do the same
// work bounded by the time actually left before every syscall.
Status RedisClientImpl::Flush(int64_t deadline_micros) {
  int done = 0;
  while (done == 0) {
    const int64_t left = deadline_micros - clock_.NowMicros();
    if (left <= 0) return IoError(EAGAIN);
    const timeval tv = ToTimeval(left);
    setsockopt(ctx_->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    errno = 0;
    if (redisBufferWrite(ctx_, &done) != REDIS_OK) return IoError(errno);
  }
  return Status::Ok();
}

Status RedisClientImpl::ReadReply(int64_t deadline_micros, redisReply** reply) {
  void* r = nullptr;
  if (redisGetReplyFromReader(ctx_, &r) != REDIS_OK) {
    return Status::Unavailable("redis protocol error: " + std::string(ctx_->errstr));
  }
  while (r == nullptr) {
    // Wait with ppoll (hrtimer, microseconds) rather than SO_RCVTIMEO, which the kernel rounds
    // up to scheduler ticks (several ms late), and which hiredis turns into a dead context.
    const int64_t left = deadline_micros - clock_.NowMicros();
    if (left <= 0) return IoError(EAGAIN);
    pollfd pfd{ctx_->fd, POLLIN, 0};
    const timespec ts{static_cast<time_t>(left / 1'000'000),
                      static_cast<long>((left % 1'000'000) * 1000)};
    const int ready = ppoll(&pfd, 1, &ts, nullptr);
    if (ready == 0) return IoError(EAGAIN);
    if (ready < 0) {
      if (errno == EINTR) continue;
      return IoError(errno);
    }
    // Readable (or hung up, which the read reports): this read does not block.
    errno = 0;
    if (redisBufferRead(ctx_) != REDIS_OK) return IoError(errno);
    if (redisGetReplyFromReader(ctx_, &r) != REDIS_OK) {
      return Status::Unavailable("redis protocol error: " + std::string(ctx_->errstr));
    }
  }
  *reply = static_cast<redisReply*>(r);
  return Status::Ok();
}

Status RedisClientImpl::IoError(int saved_errno) {
  // A socket timeout surfaces as EAGAIN on a blocking socket.
  if (saved_errno == EAGAIN || saved_errno == EWOULDBLOCK) {
    return Status::DeadlineExceeded("redis command timed out after " +
                                    std::to_string(options_.command_timeout_millis) + " ms");
  }
  if (saved_errno == EPIPE) DiscardPendingSigpipe();
  const bool eof = ctx_ != nullptr && ctx_->err == REDIS_ERR_EOF;
  return Status::Unavailable("redis connection lost: " +
                             (ctx_ != nullptr && ctx_->errstr[0] != '\0'
                                  ? std::string(ctx_->errstr)
                                  : std::string(eof ? "EOF" : "I/O error")));
}

}  // namespace tailcut
