// FakeRedisClient: a RedisClient (src/cache/redis_client.h) with no server, for unit tests of
// its users (EmbeddingCache). It records every call and leaves its callback pending until the
// test answers it (a value, a miss, any error), so a test decides what Redis says and when,
// including never. With the circuit "open" it answers every call at once, on the caller's
// thread, with Unavailable("redis circuit open"), as RedisClientImpl does.
//
// Streams are the exception: StreamAppend and StreamRead are answered at once, on the caller's
// thread, from an in-memory log per key, as a server would (ids "<ms>-<seq>" increasing,
// MAXLEN trimming, reads after an id, the same argument checks), so that tests of a shared
// log (several users of one fake) need not script every reply. Trimming is exact, one of the
// outcomes Redis's approximate MAXLEN ~ allows (never fewer than max_entries are kept). With
// SetStreamsHeld(true) they stay pending like the other calls, for the test to answer
// (AnswerStreamAppend, AnswerStreamRead, Fail), or never. Either way they are recorded.
//
// Pending callbacks are dropped, not called, when the fake is destroyed: destroy the code
// under test (whose callbacks they are) first or leave it to the test to answer them.
//
// Thread-safety: every method is safe from any thread (the code under test calls it from its
// timer thread too). Callbacks run on the thread that answers them, outside the fake's lock,
// so they may call the fake again.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cache/redis_client.h"

namespace tailcut {

class FakeRedisClient final : public RedisClient {
 public:
  enum class Kind {
    kMultiGet,
    kGet,
    kSet,
    kTryLock,
    kUnlock,
    kDeleteByPattern,
    kPing,
    kStreamAppend,
    kStreamRead
  };

  // One call as the code under test made it, with its callback until it is answered.
  struct Call {
    Kind kind = Kind::kGet;
    std::vector<std::string> keys;  // MGET: its keys; the others: their one key (or pattern).
    std::string value;              // SET, StreamAppend: the value; TryLock, Unlock: the token;
                                    // StreamRead: after_id.
    int64_t ttl = 0;                // SET: seconds; TryLock: milliseconds.
    int64_t limit = 0;              // StreamAppend: max_entries; StreamRead: count.

    std::function<void(Result<std::vector<std::optional<std::string>>>)> multi_get_done;
    std::function<void(Result<std::optional<std::string>>)> get_done;
    std::function<void(Result<bool>)> bool_done;  // TryLock, Unlock.
    std::function<void(Status)> status_done;      // Set, Ping.
    std::function<void(Result<int64_t>)> count_done;
    std::function<void(Result<std::string>)> id_done;                    // StreamAppend.
    std::function<void(Result<std::vector<StreamEntry>>)> entries_done;  // StreamRead.

    const std::string& key() const { return keys.at(0); }

    void AnswerMultiGet(std::vector<std::optional<std::string>> values) {
      ASSERT_EQ(kind, Kind::kMultiGet);
      Take(multi_get_done)(std::move(values));
    }
    void AnswerGet(std::optional<std::string> value) {
      ASSERT_EQ(kind, Kind::kGet);
      Take(get_done)(std::move(value));
    }
    // TryLock: whether the lock was taken; Unlock: whether it was deleted.
    void AnswerBool(bool value) {
      ASSERT_TRUE(kind == Kind::kTryLock || kind == Kind::kUnlock);
      if (bool_done) Take(bool_done)(value);
    }
    // A held StreamAppend: the id it got (not added to the fake's log).
    void AnswerStreamAppend(std::string id) {
      ASSERT_EQ(kind, Kind::kStreamAppend);
      if (id_done) Take(id_done)(std::move(id));
    }
    // A held StreamRead: the entries it found (the fake's log is not consulted).
    void AnswerStreamRead(std::vector<StreamEntry> entries) {
      ASSERT_EQ(kind, Kind::kStreamRead);
      Take(entries_done)(std::move(entries));
    }
    // Any call: an error (a timeout, a lost connection, an error reply).
    void Fail(const Status& status) {
      if (multi_get_done) Take(multi_get_done)(status);
      if (get_done) Take(get_done)(status);
      if (bool_done) Take(bool_done)(status);
      if (status_done) Take(status_done)(status);
      if (count_done) Take(count_done)(status);
      if (id_done) Take(id_done)(status);
      if (entries_done) Take(entries_done)(status);
    }

   private:
    // Each callback runs once: a second answer is a test bug, not a second reply.
    template <typename F>
    static F Take(F& f) {
      EXPECT_TRUE(f) << "this call was answered already";
      F out = std::move(f);
      f = nullptr;
      return out ? out : [](auto&&...) {};
    }
  };

  // While open, every call fails at once on the caller's thread (and is still recorded).
  void SetCircuitOpen(bool open) {
    std::lock_guard<std::mutex> lock(mutex_);
    circuit_open_ = open;
  }

  // While held, stream calls stay pending for the test to answer, instead of being served
  // from the in-memory log.
  void SetStreamsHeld(bool held) {
    std::lock_guard<std::mutex> lock(mutex_);
    streams_held_ = held;
  }
  // The in-memory log of stream `key`, oldest first (what StreamAppend has kept).
  std::vector<StreamEntry> stream(const std::string& key) const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<StreamEntry> out;
    if (auto it = streams_.find(key); it != streams_.end()) {
      for (const auto& [id, value] : it->second) out.push_back(StreamEntry{IdText(id), value});
    }
    return out;
  }

  // Takes the oldest unanswered call of `kind`, waiting up to `limit` for one to be made
  // (calls may come from the code's timer thread). Nullopt, and a test failure, if none came.
  std::optional<Call> Next(Kind kind, std::chrono::milliseconds limit = kWait) {
    std::unique_lock<std::mutex> lock(mutex_);
    auto it = pending_.end();
    const bool found = arrived_.wait_for(lock, limit, [&] {
      it = std::find_if(pending_.begin(), pending_.end(),
                        [kind](const Call& c) { return c.kind == kind; });
      return it != pending_.end();
    });
    if (!found) {
      ADD_FAILURE() << "no call of kind " << static_cast<int>(kind) << " was made";
      return std::nullopt;
    }
    Call call = std::move(*it);
    pending_.erase(it);
    return call;
  }
  // Unanswered calls of `kind` (those Next() has not taken).
  size_t pending(Kind kind) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return std::count_if(pending_.begin(), pending_.end(),
                         [kind](const Call& c) { return c.kind == kind; });
  }
  // Every call made so far, in order, without callbacks.
  std::vector<Call> history() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return history_;
  }
  size_t count(Kind kind) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return std::count_if(history_.begin(), history_.end(),
                         [kind](const Call& c) { return c.kind == kind; });
  }

  void MultiGet(
      std::vector<std::string> keys,
      std::function<void(Result<std::vector<std::optional<std::string>>>)> done) override {
    Call c = NewCall(Kind::kMultiGet, std::move(keys));
    c.multi_get_done = std::move(done);
    Record(std::move(c));
  }
  void Get(std::string key, std::function<void(Result<std::optional<std::string>>)> done) override {
    Call c = NewCall(Kind::kGet, {std::move(key)});
    c.get_done = std::move(done);
    Record(std::move(c));
  }
  void Set(std::string key, std::string value, int64_t ttl_seconds,
           std::function<void(Status)> done) override {
    Call c = NewCall(Kind::kSet, {std::move(key)}, std::move(value), ttl_seconds);
    c.status_done = std::move(done);
    Record(std::move(c));
  }
  void TryLock(std::string key, std::string token, int64_t ttl_millis,
               std::function<void(Result<bool>)> done) override {
    Call c = NewCall(Kind::kTryLock, {std::move(key)}, std::move(token), ttl_millis);
    c.bool_done = std::move(done);
    Record(std::move(c));
  }
  void Unlock(std::string key, std::string token, std::function<void(Result<bool>)> done) override {
    Call c = NewCall(Kind::kUnlock, {std::move(key)}, std::move(token));
    c.bool_done = std::move(done);
    Record(std::move(c));
  }
  void DeleteByPattern(std::string pattern, std::function<void(Result<int64_t>)> done) override {
    Call c = NewCall(Kind::kDeleteByPattern, {std::move(pattern)});
    c.count_done = std::move(done);
    Record(std::move(c));
  }
  void Ping(std::function<void(Status)> done) override {
    Call c = NewCall(Kind::kPing);
    c.status_done = std::move(done);
    Record(std::move(c));
  }

  void StreamAppend(std::string key, std::string value, int64_t max_entries,
                    std::function<void(Result<std::string>)> done) override {
    Call c = NewCall(Kind::kStreamAppend, {key}, value);
    c.limit = max_entries;
    c.id_done = std::move(done);
    std::optional<Call> serve = Record(std::move(c), /*stream=*/true);
    if (!serve) return;
    std::string id;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      // As Redis: the clock in ms, a sequence within the ms, never going back.
      const uint64_t now_ms =
          static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                    std::chrono::system_clock::now().time_since_epoch())
                                    .count());
      last_id_ = now_ms > last_id_.first ? StreamId{now_ms, 0}
                                         : StreamId{last_id_.first, last_id_.second + 1};
      auto& log = streams_[key];
      log.emplace(last_id_, std::move(value));
      while (max_entries > 0 && log.size() > static_cast<size_t>(max_entries)) {
        log.erase(log.begin());
      }
      id = IdText(last_id_);
    }
    if (serve->id_done) serve->id_done(std::move(id));
  }
  void StreamRead(std::string key, std::string after_id, int64_t count,
                  std::function<void(Result<std::vector<StreamEntry>>)> done) override {
    Call c = NewCall(Kind::kStreamRead, {key}, after_id);
    c.limit = count;
    c.entries_done = std::move(done);
    std::optional<Call> serve = Record(std::move(c), /*stream=*/true);
    if (!serve) return;
    // The same argument checks as the real clients.
    Result<std::vector<std::string>> argv = redis_internal::StreamReadArgv(key, after_id, count);
    if (!argv.ok()) return serve->entries_done(argv.status());
    const StreamId after =
        after_id.empty() ? StreamId{0, 0} : *redis_internal::ParseStreamId(after_id);
    std::vector<StreamEntry> out;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (auto it = streams_.find(key); it != streams_.end()) {
        for (auto e = it->second.upper_bound(after);
             e != it->second.end() && out.size() < static_cast<size_t>(count); ++e) {
          out.push_back(StreamEntry{IdText(e->first), e->second});
        }
      }
    }
    serve->entries_done(std::move(out));
  }

  BreakerState breaker_state() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return circuit_open_ ? BreakerState::kOpen : BreakerState::kClosed;
  }
  Stats stats() const override { return {}; }

  // Long: only a broken code path ever waits this long.
  static constexpr std::chrono::milliseconds kWait{5000};

 private:
  static Call NewCall(Kind kind, std::vector<std::string> keys = {}, std::string value = {},
                      int64_t ttl = 0) {
    Call c;
    c.kind = kind;
    c.keys = std::move(keys);
    c.value = std::move(value);
    c.ttl = ttl;
    return c;
  }
  // Records the call, then fails it at once while the circuit is open, or hands it back to be
  // served now (a stream call, not held), or leaves it pending for the test.
  std::optional<Call> Record(Call call, bool stream = false) {
    Call recorded = call;  // History keeps no callbacks (they are answered once, from pending_).
    recorded.multi_get_done = nullptr;
    recorded.get_done = nullptr;
    recorded.bool_done = nullptr;
    recorded.status_done = nullptr;
    recorded.count_done = nullptr;
    recorded.id_done = nullptr;
    recorded.entries_done = nullptr;
    bool reject;
    bool serve;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      history_.push_back(std::move(recorded));
      reject = circuit_open_;
      serve = !reject && stream && !streams_held_;
      if (!reject && !serve) pending_.push_back(std::move(call));
    }
    if (reject) {
      call.Fail(Status::Unavailable("redis circuit open"));
      return std::nullopt;
    }
    if (serve) return call;
    arrived_.notify_all();
    return std::nullopt;
  }

  // (ms, seq): ordered as Redis orders ids.
  using StreamId = std::pair<uint64_t, uint64_t>;
  static std::string IdText(const StreamId& id) {
    return std::to_string(id.first) + "-" + std::to_string(id.second);
  }

  mutable std::mutex mutex_;
  std::condition_variable arrived_;
  bool circuit_open_ = false;
  bool streams_held_ = false;
  std::deque<Call> pending_;
  std::vector<Call> history_;
  std::map<std::string, std::map<StreamId, std::string>> streams_;
  StreamId last_id_{0, 0};  // The last id given, across keys (Redis's are per stream).
};

}  // namespace tailcut
