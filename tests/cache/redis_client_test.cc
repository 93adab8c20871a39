// RedisClient against a real redis-server (see redis_server_fixture.h), including a server
// that is killed, paused and restarted under the client.
#include "cache/redis_client.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <future>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "cache/cached_value.h"
#include "tests/cache/await_callback.h"
#include "tests/cache/fake_redis_client.h"
#include "tests/cache/parsed_reply.h"
#include "tests/cache/redis_server_fixture.h"

namespace tailcut {
namespace {

using namespace std::chrono_literals;
using namespace std::string_literals;
using BreakerState = RedisClient::BreakerState;
using Values = std::vector<std::optional<std::string>>;
using Entries = std::vector<RedisClient::StreamEntry>;

int64_t NowMillis() {
  return SystemClock::Get().NowMicros() / 1000;
}

// Counts callbacks from any thread; Wait() until `n` have arrived.
class Latch {
 public:
  void Arrive() {
    std::lock_guard<std::mutex> lock(mu_);
    ++count_;
    cv_.notify_all();
  }
  bool Wait(int n, std::chrono::milliseconds timeout = 10s) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return count_ >= n; });
  }
  int count() {
    std::lock_guard<std::mutex> lock(mu_);
    return count_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int count_ = 0;
};

class RedisClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    ASSERT_TRUE(server_.Start(&error)) << error;
  }

  RedisOptions Options(std::string prefix = "test") {
    RedisOptions o;
    o.port = server_.port();
    o.key_prefix = std::move(prefix);
    return o;
  }
  std::unique_ptr<RedisClientImpl> Client(const RedisOptions& o, MetricsRegistry* m = nullptr) {
    return std::make_unique<RedisClientImpl>(o, SystemClock::Get(), m);
  }

  static Status SetSync(RedisClient& c, std::string key, std::string value, int64_t ttl = 0) {
    return Await<Status>([&](auto cb) { c.Set(std::move(key), std::move(value), ttl, cb); });
  }
  static Result<std::optional<std::string>> GetSync(RedisClient& c, std::string key) {
    return Await<Result<std::optional<std::string>>>([&](auto cb) { c.Get(std::move(key), cb); });
  }
  static Result<Values> MultiGetSync(RedisClient& c, std::vector<std::string> keys) {
    return Await<Result<Values>>([&](auto cb) { c.MultiGet(std::move(keys), cb); });
  }
  static Result<bool> TryLockSync(RedisClient& c, std::string key, std::string token,
                                  int64_t ttl_millis) {
    return Await<Result<bool>>(
        [&](auto cb) { c.TryLock(std::move(key), std::move(token), ttl_millis, cb); });
  }
  static Result<bool> UnlockSync(RedisClient& c, std::string key, std::string token) {
    return Await<Result<bool>>([&](auto cb) { c.Unlock(std::move(key), std::move(token), cb); });
  }
  static Status PingSync(RedisClient& c) {
    return Await<Status>([&](auto cb) { c.Ping(cb); });
  }
  static Result<int64_t> DeleteSync(RedisClient& c, std::string pattern) {
    return Await<Result<int64_t>>([&](auto cb) { c.DeleteByPattern(std::move(pattern), cb); });
  }
  static Result<std::string> AppendSync(RedisClient& c, std::string key, std::string value,
                                        int64_t max_entries = 0) {
    return Await<Result<std::string>>(
        [&](auto cb) { c.StreamAppend(std::move(key), std::move(value), max_entries, cb); });
  }
  static Result<Entries> ReadSync(RedisClient& c, std::string key, std::string after_id,
                                  int64_t count = 1000) {
    return Await<Result<Entries>>(
        [&](auto cb) { c.StreamRead(std::move(key), std::move(after_id), count, cb); });
  }

  // Polls until the breaker reaches `want` (driven by the client's own probes).
  static bool WaitForBreaker(RedisClient& c, BreakerState want, std::chrono::milliseconds limit) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
      if (c.breaker_state() == want) return true;
      std::this_thread::sleep_for(5ms);
    }
    return c.breaker_state() == want;
  }

  testing::RedisServer server_;
};

const std::string kBinary("\0\xff\r\nTCE1 \x01\x80 end", 16);

TEST_F(RedisClientTest, SetGetAndMultiGetRoundTripBinaryValuesWithTtl) {
  auto client = Client(Options());
  const std::vector<float> embedding{0.5f, -1.25f, 3e-7f};
  const std::string encoded = EncodeEmbedding(embedding);
  const std::string binary_key("k\0\xfe", 3);
  ASSERT_TRUE(SetSync(*client, "a", kBinary, 100).ok());
  ASSERT_TRUE(SetSync(*client, binary_key, encoded).ok());  // ttl 0: entry_ttl_seconds.

  auto values = MultiGetSync(*client, {"a", "missing", binary_key});
  ASSERT_TRUE(values.ok()) << values.status().ToString();
  ASSERT_EQ(values->size(), 3u);
  EXPECT_EQ((*values)[0], kBinary);
  EXPECT_EQ((*values)[1], std::nullopt);
  ASSERT_TRUE((*values)[2].has_value());
  auto decoded = DecodeEmbedding(*(*values)[2], 3);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(*decoded, embedding);

  auto one = GetSync(*client, "a");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(*one, kBinary);
  auto none = GetSync(*client, "missing");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, std::nullopt);
  EXPECT_TRUE(MultiGetSync(*client, {})->empty());

  const int64_t ttl_a = std::stoll(server_.CommandText({"TTL", "test:a"}));
  EXPECT_GT(ttl_a, 90);
  EXPECT_LE(ttl_a, 100);
  const int64_t ttl_default = std::stoll(server_.CommandText({"TTL", "test:" + binary_key}));
  EXPECT_GT(ttl_default, 3500);
  EXPECT_LE(ttl_default, 3600);
  EXPECT_EQ(server_.CommandText({"GET", "test:a"}), kBinary);
  EXPECT_TRUE(PingSync(*client).ok());
}

TEST_F(RedisClientTest, KeysArePrefixedPerDeployment) {
  auto a = Client(Options("dep-a"));
  auto b = Client(Options("dep-b"));
  auto raw = Client(Options(""));
  ASSERT_TRUE(SetSync(*a, "k", "from-a").ok());
  EXPECT_EQ(a->PrefixedKey("k"), "dep-a:k");
  EXPECT_EQ(server_.CommandText({"GET", "dep-a:k"}), "from-a");
  EXPECT_EQ(server_.CommandText({"EXISTS", "k"}), "0");
  EXPECT_EQ(*GetSync(*b, "k"), std::nullopt);
  EXPECT_EQ(*GetSync(*raw, "dep-a:k"), "from-a");
}

TEST_F(RedisClientTest, ConcurrentMultiGetsArePipelined) {
  auto client = Client(Options());
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(SetSync(*client, "p" + std::to_string(i), "v" + std::to_string(i)).ok());
  }
  server_.Command({"CONFIG", "RESETSTAT"});
  const int64_t reads_before = server_.InfoField("stats", "total_reads_processed");
  const auto before = client->stats();

  constexpr int kThreads = 4;
  constexpr int kPerThread = 250;
  Latch latch;
  std::atomic<int> good{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const int k = (t + i) % 10;
        client->MultiGet({"p" + std::to_string(k), "nope"}, [&, k](Result<Values> r) {
          if (r.ok() && r->size() == 2 && (*r)[0] == "v" + std::to_string(k) && !(*r)[1]) {
            good.fetch_add(1);
          }
          latch.Arrive();
        });
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_TRUE(latch.Wait(kThreads * kPerThread));
  EXPECT_EQ(good.load(), kThreads * kPerThread);

  const auto after = client->stats();
  const uint64_t rounds = after.round_trips - before.round_trips;
  const uint64_t sent = after.commands_sent - before.commands_sent;
  // Redis's own count of socket reads (admin connections included) is the round trips it saw.
  const int64_t redis_reads = server_.InfoField("stats", "total_reads_processed") - reads_before;
  const int64_t mget_calls = [&] {
    const std::string s = server_.CommandText({"INFO", "commandstats"});
    const size_t at = s.find("cmdstat_mget:calls=");
    return at == std::string::npos ? -1 : std::atoll(s.c_str() + at + 19);
  }();
  std::printf(
      "[pipelining] %llu MGETs in %llu round trips (avg %.1f per pipeline); redis saw %lld "
      "socket reads for %lld MGET calls\n",
      static_cast<unsigned long long>(sent), static_cast<unsigned long long>(rounds),
      static_cast<double>(sent) / static_cast<double>(rounds), static_cast<long long>(redis_reads),
      static_cast<long long>(mget_calls));
  EXPECT_EQ(sent, uint64_t{kThreads * kPerThread});
  EXPECT_EQ(mget_calls, kThreads * kPerThread);
  EXPECT_LT(rounds, sent / 4);
  EXPECT_LT(redis_reads, mget_calls / 4);
}

TEST_F(RedisClientTest, TryLockAndUnlockOnlyTheOwnerReleases) {
  auto client = Client(Options());
  EXPECT_TRUE(*TryLockSync(*client, "lock", "owner-a", 10'000));
  EXPECT_FALSE(*TryLockSync(*client, "lock", "owner-b", 10'000));  // Held.
  EXPECT_FALSE(*UnlockSync(*client, "lock", "owner-b"));           // Not the owner.
  EXPECT_EQ(server_.CommandText({"GET", "test:lock"}), "owner-a");
  const int64_t pttl = std::stoll(server_.CommandText({"PTTL", "test:lock"}));
  EXPECT_GT(pttl, 9000);
  EXPECT_LE(pttl, 10'000);
  EXPECT_TRUE(*UnlockSync(*client, "lock", "owner-a"));
  EXPECT_FALSE(*UnlockSync(*client, "lock", "owner-a"));  // Already released.
  EXPECT_EQ(server_.CommandText({"EXISTS", "test:lock"}), "0");

  // Expiry: a crashed owner's lock frees itself, and its late Unlock can't free the new one.
  EXPECT_TRUE(*TryLockSync(*client, "lock", "owner-b", 100));
  std::this_thread::sleep_for(250ms);
  EXPECT_TRUE(*TryLockSync(*client, "lock", "owner-c", 10'000));
  EXPECT_FALSE(*UnlockSync(*client, "lock", "owner-b"));
  EXPECT_EQ(server_.CommandText({"GET", "test:lock"}), "owner-c");

  auto bad = TryLockSync(*client, "lock", "x", 0);
  EXPECT_EQ(bad.status().code(), Status::Code::kInvalidArgument);
}

TEST_F(RedisClientTest, AuthWithRequirepass) {
  ASSERT_EQ(server_.CommandText({"CONFIG", "SET", "requirepass", "s3cret-pw"}), "OK");
  server_.SetAdminAuth("", "s3cret-pw");
  RedisOptions o = Options();
  o.password = "s3cret-pw";
  auto client = Client(o);
  ASSERT_TRUE(SetSync(*client, "k", "v").ok());
  EXPECT_EQ(*GetSync(*client, "k"), "v");

  auto anonymous = Client(Options());
  auto r = GetSync(*anonymous, "k");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kUnauthenticated) << r.status().ToString();
  EXPECT_NE(r.status().message().find("NOAUTH"), std::string::npos);
}

TEST_F(RedisClientTest, AuthWithAclUserAndSelectDb) {
  ASSERT_EQ(server_.CommandText(
                {"ACL", "SETUSER", "app", "on", ">app-pw", "~app:*", "+@all", "-@dangerous"}),
            "OK");
  RedisOptions o = Options("app");
  o.username = "app";
  o.password = "app-pw";
  o.db = 3;
  auto client = Client(o);
  ASSERT_TRUE(SetSync(*client, "k", "v").ok());
  EXPECT_EQ(*GetSync(*client, "k"), "v");
  EXPECT_NE(server_.CommandText({"INFO", "keyspace"}).find("db3:keys=1"), std::string::npos);
  EXPECT_EQ(server_.CommandText({"EXISTS", "app:k"}), "0");  // Not in db 0.

  // Keys outside the user's pattern: NOPERM, a per-command error that must not open the
  // breaker (the server is fine, this key is not ours).
  RedisOptions other = o;
  other.key_prefix = "other";
  auto denied = Client(other);
  for (int i = 0; i < 10; ++i) {
    auto r = GetSync(*denied, "k");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Status::Code::kPermissionDenied) << r.status().ToString();
  }
  EXPECT_EQ(denied->breaker_state(), BreakerState::kClosed);

  RedisOptions bad_db = o;
  bad_db.db = 999;
  auto r = GetSync(*Client(bad_db), "k");
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument) << r.status().ToString();
}

TEST_F(RedisClientTest, WrongPasswordIsAClearErrorAndOpensTheBreaker) {
  ASSERT_EQ(server_.CommandText({"CONFIG", "SET", "requirepass", "right-pw"}), "OK");
  server_.SetAdminAuth("", "right-pw");
  MetricsRegistry metrics;
  RedisOptions o = Options();
  o.password = "Wr0ng-Pa55word";
  o.breaker_failure_threshold = 3;
  o.breaker_open_millis = 60'000;
  auto client = Client(o, &metrics);

  auto first = PingSync(*client);
  EXPECT_EQ(first.code(), Status::Code::kUnauthenticated);
  EXPECT_NE(first.message().find("redis AUTH failed: WRONGPASS"), std::string::npos)
      << first.message();
  int calls = 1;
  while (client->breaker_state() != BreakerState::kOpen && calls < 10) {
    auto s = PingSync(*client);
    EXPECT_EQ(s.code(), Status::Code::kUnauthenticated) << s.ToString();
    EXPECT_EQ(s.message().find("Wr0ng-Pa55word"), std::string::npos);
    ++calls;
  }
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(client->breaker_state(), BreakerState::kOpen);

  // Open: fails at once, on the caller's thread, before the call returns.
  bool called = false;
  std::thread::id thread;
  client->Get("k", [&](Result<std::optional<std::string>> r) {
    called = true;
    thread = std::this_thread::get_id();
    EXPECT_EQ(r.status().code(), Status::Code::kUnavailable);
    EXPECT_EQ(r.status().message(), "redis circuit open");
  });
  EXPECT_TRUE(called);
  EXPECT_EQ(thread, std::this_thread::get_id());

  const std::string text = metrics.Serialize();
  EXPECT_EQ(text.find("Wr0ng-Pa55word"), std::string::npos);
  EXPECT_NE(text.find("tailcut_redis_breaker_state 2"), std::string::npos);
  EXPECT_NE(text.find("tailcut_redis_breaker_transitions_total{to=\"open\"} 1"), std::string::npos);
  EXPECT_NE(text.find("tailcut_redis_commands_total{command=\"get\",result=\"rejected\"} 1"),
            std::string::npos);
}

TEST_F(RedisClientTest, KilledServerFailsFastOpensBreakerAndRecoversByItself) {
  MetricsRegistry metrics;
  RedisOptions o = Options();
  o.breaker_failure_threshold = 3;
  o.breaker_open_millis = 200;
  // Far above what failing fast takes on any machine, so a slow one cannot turn a refused
  // connection into a timeout: the codes and counts below then do not depend on speed.
  o.command_timeout_millis = 2000;
  auto client = Client(o, &metrics);
  ASSERT_TRUE(SetSync(*client, "k", "v").ok());

  server_.Kill();
  int calls = 0;
  while (client->breaker_state() != BreakerState::kOpen && calls < 20) {
    auto r = GetSync(*client, "k");
    EXPECT_FALSE(r.ok());
    // Failed fast on the refused connection: Unavailable, where running out the command
    // timeout would be DeadlineExceeded (and counted as a timeout below), however slow the
    // machine is.
    EXPECT_EQ(r.status().code(), Status::Code::kUnavailable) << r.status().ToString();
    ++calls;
  }
  EXPECT_NE(metrics.Serialize().find(
                "tailcut_redis_commands_total{command=\"get\",result=\"timeout\"} 0"),
            std::string::npos);
  EXPECT_EQ(client->breaker_state(), BreakerState::kOpen);
  EXPECT_LE(calls, 3);
  auto rejected = GetSync(*client, "k");
  EXPECT_EQ(rejected.status().message(), "redis circuit open");

  // Still down at the first probes: it stays open (probe failures reopen it).
  std::this_thread::sleep_for(450ms);
  EXPECT_NE(client->breaker_state(), BreakerState::kClosed);

  std::string error;
  ASSERT_TRUE(server_.Restart(&error)) << error;
  // No calls: the client's own probe closes the breaker.
  EXPECT_TRUE(WaitForBreaker(*client, BreakerState::kClosed, 3s));
  auto after = GetSync(*client, "k");
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(*after, std::nullopt);  // A fresh server, without persistence.
  ASSERT_TRUE(SetSync(*client, "k", "v2").ok());

  const std::string text = metrics.Serialize();
  EXPECT_NE(text.find("tailcut_redis_breaker_state 0"), std::string::npos);
  EXPECT_NE(text.find("tailcut_redis_breaker_transitions_total{to=\"closed\"} 1"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("tailcut_redis_reconnects_total 0"), std::string::npos);
  EXPECT_GE(client->stats().connects, 2u);
}

TEST_F(RedisClientTest, PausedServerTimesOutWithinCommandTimeoutAndEveryCallbackFires) {
  MetricsRegistry metrics;
  RedisOptions o = Options();
  o.command_timeout_millis = 100;
  o.breaker_open_millis = 300;
  auto client = Client(o, &metrics);
  ASSERT_TRUE(SetSync(*client, "k", "v").ok());

  server_.Pause();
  constexpr int kWaves = 20;
  constexpr int kPerWave = 10;
  std::mutex mu;
  std::vector<int64_t> latencies;
  std::vector<Status::Code> codes;
  Latch latch;
  for (int w = 0; w < kWaves; ++w) {
    for (int i = 0; i < kPerWave; ++i) {
      const int64_t start = NowMillis();
      client->Get("k", [&, start](Result<std::optional<std::string>> r) {
        {
          std::lock_guard<std::mutex> lock(mu);
          latencies.push_back(NowMillis() - start);
          codes.push_back(r.status().code());
        }
        latch.Arrive();
      });
    }
    std::this_thread::sleep_for(15ms);
  }
  ASSERT_TRUE(latch.Wait(kWaves * kPerWave, 5s)) << latch.count() << " callbacks";
  {
    std::lock_guard<std::mutex> lock(mu);
    const int64_t worst = *std::max_element(latencies.begin(), latencies.end());
    std::printf("[sigstop] %zu calls, worst callback latency %lld ms (timeout %lld ms)\n",
                latencies.size(), static_cast<long long>(worst),
                static_cast<long long>(o.command_timeout_millis));
    EXPECT_LE(worst, o.command_timeout_millis + kSlackMillis);
    const auto timeouts = std::count(codes.begin(), codes.end(), Status::Code::kDeadlineExceeded);
    EXPECT_GT(timeouts, 0);
    for (auto c : codes) {
      EXPECT_TRUE(c == Status::Code::kDeadlineExceeded || c == Status::Code::kUnavailable);
    }
  }
  EXPECT_NE(metrics.Serialize().find("tailcut_redis_breaker_transitions_total{to=\"open\"} 1"),
            std::string::npos);

  server_.Resume();
  EXPECT_TRUE(WaitForBreaker(*client, BreakerState::kClosed, 3s));
  auto r = GetSync(*client, "k");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "v");
}

TEST_F(RedisClientTest, QueueBoundRejectsOnTheCallersThread) {
  RedisOptions o = Options();
  o.max_queued_commands = 10;
  o.command_timeout_millis = 200;
  o.breaker_failure_threshold = 0;
  auto client = Client(o);
  ASSERT_TRUE(PingSync(*client).ok());
  server_.Pause();
  Latch latch;
  std::atomic<int> queue_full{0};
  const auto caller = std::this_thread::get_id();
  for (int i = 0; i < 100; ++i) {
    client->Get("k", [&](Result<std::optional<std::string>> r) {
      if (r.status().message().find("queue full") != std::string::npos) {
        EXPECT_EQ(std::this_thread::get_id(), caller);
        queue_full.fetch_add(1);
      }
      latch.Arrive();
    });
  }
  EXPECT_GE(queue_full.load(), 80);
  EXPECT_TRUE(latch.Wait(100, 2s));
  server_.Resume();
}

TEST_F(RedisClientTest, DestructorCallsEveryQueuedAndInFlightCallback) {
  RedisOptions o = Options();
  o.command_timeout_millis = 10'000;  // Nothing may complete by timing out.
  auto client = Client(o);
  ASSERT_TRUE(PingSync(*client).ok());
  server_.Pause();
  constexpr int kCalls = 300;
  std::atomic<int> unavailable{0};
  Latch latch;
  for (int i = 0; i < kCalls; ++i) {
    client->Get("k", [&](Result<std::optional<std::string>> r) {
      if (r.status().code() == Status::Code::kUnavailable) unavailable.fetch_add(1);
      latch.Arrive();
    });
    if (i == kCalls / 2) std::this_thread::sleep_for(50ms);  // First half in flight.
  }
  const int64_t start = NowMillis();
  client.reset();
  const int64_t took = NowMillis() - start;
  EXPECT_EQ(latch.count(), kCalls);  // All of them, before the destructor returned.
  EXPECT_EQ(unavailable.load(), kCalls);
  EXPECT_LT(took, 1000) << "the destructor waited for a blocked read";
  server_.Resume();
}

TEST_F(RedisClientTest, DeleteByPatternDeletesOnlyMatchingKeysOfItsPrefix) {
  auto client = Client(Options());
  auto other = Client(Options("other"));
  constexpr int kDel = 2500;  // Several SCAN/UNLINK steps.
  Latch latch;
  std::atomic<int> failed{0};
  for (int i = 0; i < kDel; ++i) {
    client->Set("del:" + std::to_string(i), "x", 0, [&](Status s) {
      if (!s.ok()) failed.fetch_add(1);
      latch.Arrive();
    });
  }
  ASSERT_TRUE(latch.Wait(kDel));
  ASSERT_EQ(failed.load(), 0);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(SetSync(*client, "keep:" + std::to_string(i), "y").ok());
  ASSERT_TRUE(SetSync(*other, "del:1", "z").ok());

  auto deleted = DeleteSync(*client, "del:*");
  ASSERT_TRUE(deleted.ok()) << deleted.status().ToString();
  EXPECT_EQ(*deleted, kDel);
  EXPECT_EQ(server_.CommandText({"DBSIZE"}), "11");
  EXPECT_EQ(server_.CommandText({"EXISTS", "other:del:1"}), "1");
  EXPECT_EQ(*DeleteSync(*client, "del:*"), 0);

  // Glob characters in the prefix are literal: "a*" must not match "ab".
  auto star = Client(Options("a*"));
  auto ab = Client(Options("ab"));
  ASSERT_TRUE(SetSync(*star, "k", "1").ok());
  ASSERT_TRUE(SetSync(*ab, "k", "2").ok());
  EXPECT_EQ(*DeleteSync(*star, "*"), 1);
  EXPECT_EQ(server_.CommandText({"EXISTS", "ab:k"}), "1");
}

TEST_F(RedisClientTest, AThrowingCallbackDoesNotKillTheClient) {
  auto client = Client(Options());
  Latch latch;
  client->Ping([&](Status) {
    latch.Arrive();
    throw std::runtime_error("callback bug");
  });
  ASSERT_TRUE(latch.Wait(1));
  EXPECT_TRUE(PingSync(*client).ok());
}

// ---- Streams. ----

std::vector<std::string> ValuesOf(const Entries& entries) {
  std::vector<std::string> values;
  for (const auto& e : entries) values.push_back(e.value);
  return values;
}

// Every id well formed and greater than the one before.
void ExpectIncreasingIds(const Entries& entries) {
  std::optional<std::pair<uint64_t, uint64_t>> last;
  for (const auto& e : entries) {
    const auto id = redis_internal::ParseStreamId(e.id);
    ASSERT_TRUE(id.has_value()) << e.id;
    ASSERT_NE(e.id.find('-'), std::string::npos) << e.id;
    if (last) {
      EXPECT_GT(*id, *last) << e.id;
    }
    last = id;
  }
}

TEST_F(RedisClientTest, StreamAppendThenReadReturnsValuesInOrderAfterAnId) {
  MetricsRegistry metrics;
  auto client = Client(Options(), &metrics);
  const std::vector<std::string> values{"one", "two", "three", "four", "five"};
  std::vector<std::string> ids;
  for (const auto& v : values) {
    auto id = AppendSync(*client, "log", v);
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    ids.push_back(*id);
  }
  EXPECT_EQ(server_.CommandText({"XLEN", "test:log"}), "5");

  for (const std::string start : {"", "0-0", "0"}) {
    auto all = ReadSync(*client, "log", start);
    ASSERT_TRUE(all.ok()) << all.status().ToString();
    EXPECT_EQ(ValuesOf(*all), values) << "after '" << start << "'";
    ExpectIncreasingIds(*all);
    ASSERT_EQ(all->size(), ids.size());
    for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ((*all)[i].id, ids[i]);
  }
  // After an id: only the later ones; after the last: none.
  auto later = ReadSync(*client, "log", ids[1]);
  ASSERT_TRUE(later.ok());
  EXPECT_EQ(ValuesOf(*later), (std::vector<std::string>{"three", "four", "five"}));
  auto none = ReadSync(*client, "log", ids.back());
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_TRUE(none->empty());
  // Any id works, in the stream or not, "<ms>-<seq>" or "<ms>" (seq 0); ids order as numbers.
  const auto second = *redis_internal::ParseStreamId(ids[1]);
  const auto last = *redis_internal::ParseStreamId(ids.back());
  for (const auto& after : {std::pair<uint64_t, uint64_t>{second.first, second.second + 1},
                            std::pair<uint64_t, uint64_t>{last.first, 0}}) {
    std::vector<std::string> expected;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (*redis_internal::ParseStreamId(ids[i]) > after) expected.push_back(values[i]);
    }
    const std::string id = std::to_string(after.first) + "-" + std::to_string(after.second);
    EXPECT_EQ(ValuesOf(*ReadSync(*client, "log", id)), expected) << id;
    if (after.second == 0) {
      EXPECT_EQ(ValuesOf(*ReadSync(*client, "log", std::to_string(after.first))), expected);
    }
  }

  // Paging with COUNT: a reader that polls with the last id it saw gets everything, once.
  std::vector<std::string> paged;
  std::string cursor;
  int pages = 0;
  while (true) {
    auto page = ReadSync(*client, "log", cursor, 2);
    ASSERT_TRUE(page.ok());
    if (page->empty()) break;
    EXPECT_LE(page->size(), 2u);
    for (const auto& e : *page) paged.push_back(e.value);
    cursor = page->back().id;
    ++pages;
  }
  EXPECT_EQ(paged, values);
  EXPECT_EQ(pages, 3);

  // Appending after a read: the poller sees exactly the new entry.
  ASSERT_TRUE(AppendSync(*client, "log", "six").ok());
  EXPECT_EQ(ValuesOf(*ReadSync(*client, "log", cursor)), (std::vector<std::string>{"six"}));

  // A stream that does not exist reads as empty, and is not created by the read.
  auto missing = ReadSync(*client, "no-such-log", "");
  ASSERT_TRUE(missing.ok()) << missing.status().ToString();
  EXPECT_TRUE(missing->empty());
  EXPECT_EQ(server_.CommandText({"EXISTS", "test:no-such-log"}), "0");
  // No TTL on a stream: MAXLEN bounds it.
  EXPECT_EQ(server_.CommandText({"TTL", "test:log"}), "-1");

  const std::string text = metrics.Serialize();
  for (const char* line : {
           "tailcut_redis_commands_total{command=\"xadd\",result=\"ok\"} 6",
           "tailcut_redis_commands_total{command=\"xrange\",result=\"ok\"} 14",
           "tailcut_redis_commands_total{command=\"xrange\",result=\"timeout\"} 0",
           "tailcut_redis_command_duration_seconds_count{command=\"xadd\"} 6",
       }) {
    EXPECT_NE(text.find(line), std::string::npos) << line;
  }
}

TEST_F(RedisClientTest, StreamBinaryValuesRoundTrip) {
  RedisOptions o = Options();
  o.command_timeout_millis = 2000;  // A big value on 2 shared cores; timing is not tested here.
  auto client = Client(o);
  const std::string big(200'000, '\0');
  std::string all_bytes;
  for (int b = 0; b < 256; ++b) all_bytes.push_back(static_cast<char>(b));
  const std::vector<std::string> values{kBinary, "", big, all_bytes, std::string("v\0v", 3)};
  for (const auto& v : values) ASSERT_TRUE(AppendSync(*client, "bin", v).ok());
  const std::string binary_key("s\0\xfe", 3);
  ASSERT_TRUE(AppendSync(*client, binary_key, kBinary).ok());

  auto read = ReadSync(*client, "bin", "");
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(ValuesOf(*read), values);
  EXPECT_EQ(ValuesOf(*ReadSync(*client, binary_key, "")), (std::vector<std::string>{kBinary}));
}

TEST_F(RedisClientTest, StreamAppendTrimsToAboutMaxEntries) {
  RedisOptions o = Options();
  o.command_timeout_millis = 5000;  // 1000 appends queued at once; timing is not tested here.
  auto client = Client(o);
  // MAXLEN ~ trims whole nodes only: up to one node's worth more may stay.
  auto config = server_.Command({"CONFIG", "GET", "stream-node-max-entries"});
  ASSERT_NE(config, nullptr);
  ASSERT_EQ(config->type, REDIS_REPLY_ARRAY);
  ASSERT_EQ(config->elements, 2u);
  const int64_t node_entries = std::stoll(std::string(config->element[1]->str));
  ASSERT_GT(node_entries, 0);

  constexpr int64_t kMax = 50;
  constexpr int kAppends = 1000;
  Latch latch;
  std::atomic<int> failed{0};
  for (int i = 0; i < kAppends; ++i) {
    // Pipelined from one thread: queued, hence appended, in call order.
    client->StreamAppend("bounded", std::to_string(i), kMax, [&](Result<std::string> r) {
      if (!r.ok()) failed.fetch_add(1);
      latch.Arrive();
    });
  }
  ASSERT_TRUE(latch.Wait(kAppends));
  ASSERT_EQ(failed.load(), 0);
  client->StreamAppend("bounded", "last", kMax, nullptr);  // Fire and forget.
  auto read = ReadSync(*client, "bounded", "", 100'000);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  const auto n = static_cast<int64_t>(read->size());
  std::printf("[maxlen] %d appends with MAXLEN ~ %lld kept %lld entries (node size %lld)\n",
              kAppends + 1, static_cast<long long>(kMax), static_cast<long long>(n),
              static_cast<long long>(node_entries));
  EXPECT_GE(n, kMax);
  EXPECT_LE(n, kMax + node_entries);
  EXPECT_EQ(std::to_string(n), server_.CommandText({"XLEN", "test:bounded"}));
  // What stays is the newest, contiguous, in order.
  ASSERT_GE(read->size(), 2u);
  EXPECT_EQ(read->back().value, "last");
  for (size_t i = 0; i + 1 < read->size(); ++i) {
    EXPECT_EQ((*read)[i].value, std::to_string(kAppends - static_cast<int64_t>(read->size()) + 1 +
                                               static_cast<int64_t>(i)));
  }
  ExpectIncreasingIds(*read);

  // max_entries <= 0: no trimming at all.
  for (int i = 0; i < 300; ++i) client->StreamAppend("unbounded", "x", 0, nullptr);
  ASSERT_TRUE(AppendSync(*client, "unbounded", "y", -1).ok());
  EXPECT_EQ(ReadSync(*client, "unbounded", "", 100'000)->size(), 301u);
}

TEST_F(RedisClientTest, StreamKeysArePrefixedPerDeployment) {
  auto a = Client(Options("dep-a"));
  auto b = Client(Options("dep-b"));
  auto raw = Client(Options(""));
  ASSERT_TRUE(AppendSync(*a, "log", "from-a").ok());
  EXPECT_EQ(server_.CommandText({"TYPE", "dep-a:log"}), "stream");
  EXPECT_EQ(server_.CommandText({"EXISTS", "log"}), "0");
  auto other = ReadSync(*b, "log", "");
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE(other->empty());
  EXPECT_EQ(ValuesOf(*ReadSync(*raw, "dep-a:log", "")), (std::vector<std::string>{"from-a"}));
  // A second replica of the same deployment shares the log.
  auto a2 = Client(Options("dep-a"));
  EXPECT_EQ(ValuesOf(*ReadSync(*a2, "log", "")), (std::vector<std::string>{"from-a"}));
}

TEST_F(RedisClientTest, StreamBadArgumentsAndWrongTypeAreErrors) {
  auto client = Client(Options());
  // Checked before anything is sent: InvalidArgument at once, on the caller's thread.
  const std::vector<std::pair<std::string, int64_t>> bad{
      {"", 0},    {"", -1},     {"abc", 10},
      {"-1", 10}, {"1-", 10},   {"1-2-3", 10},
      {"+", 10},  {"1 -2", 10}, {"99999999999999999999-0", 10}};
  for (const auto& pair : bad) {
    // Named copies: clang 14 cannot capture structured bindings in a lambda.
    const std::string after = pair.first;
    const int64_t count = pair.second;
    bool called = false;
    client->StreamRead("log", after, count, [&](Result<Entries> r) {
      called = true;
      EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument) << "'" << after << "'";
    });
    EXPECT_TRUE(called) << "'" << after << "'";
  }
  // A key of another type: that command's error, not an outage.
  ASSERT_TRUE(SetSync(*client, "plain", "v").ok());
  auto read = ReadSync(*client, "plain", "");
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), Status::Code::kInternal);
  EXPECT_NE(read.status().message().find("WRONGTYPE"), std::string::npos);
  auto append = AppendSync(*client, "plain", "x");
  ASSERT_FALSE(append.ok());
  EXPECT_EQ(append.status().code(), Status::Code::kInternal);
  EXPECT_EQ(client->breaker_state(), BreakerState::kClosed);
  EXPECT_EQ(*GetSync(*client, "plain"), "v");
}

using testing::ParsedReply;  // A reply from RESP text (parsed_reply.h).

TEST(RedisStreamRepliesTest, MalformedRepliesAreErrorsNotCrashes) {
  // Good: field "v" found among others; an entry without it (or with nil fields) reads as "".
  ParsedReply good(
      "*3\r\n"s
      "*2\r\n$3\r\n1-0\r\n*4\r\n$1\r\nx\r\n$1\r\n1\r\n$1\r\nv\r\n$3\r\na\0b\r\n"
      "*2\r\n$3\r\n2-5\r\n*2\r\n$1\r\nw\r\n$1\r\n2\r\n"
      "*2\r\n$3\r\n3-0\r\n$-1\r\n");
  ASSERT_NE(good.reply, nullptr);
  auto entries = redis_internal::StreamEntries(good.reply);
  ASSERT_TRUE(entries.ok()) << entries.status().ToString();
  EXPECT_EQ(*entries, (Entries{{"1-0", std::string("a\0b", 3)}, {"2-5", ""}, {"3-0", ""}}));
  ParsedReply empty("*0\r\n");
  EXPECT_TRUE(redis_internal::StreamEntries(empty.reply)->empty());

  for (const std::string& bad : {
           std::string("+OK\r\n"),  // Not an array.
           std::string("$3\r\n1-0\r\n"), std::string(":1\r\n"),
           std::string("*1\r\n:1\r\n"),                                      // Not an entry.
           std::string("*1\r\n*1\r\n$3\r\n1-0\r\n"),                         // No fields.
           std::string("*1\r\n*3\r\n$3\r\n1-0\r\n*0\r\n*0\r\n"),             // Too long.
           std::string("*1\r\n*2\r\n:1\r\n*0\r\n"),                          // Id not a string.
           std::string("*1\r\n*2\r\n$3\r\nabc\r\n*0\r\n"),                   // Id not an id.
           std::string("*1\r\n*2\r\n$3\r\n1-0\r\n*1\r\n$1\r\nv\r\n"),        // Odd fields.
           std::string("*1\r\n*2\r\n$3\r\n1-0\r\n*2\r\n$1\r\nv\r\n:7\r\n"),  // Value an integer.
           std::string("*1\r\n*2\r\n$3\r\n1-0\r\n*2\r\n*0\r\n$1\r\nx\r\n"),  // Field an array.
           std::string("*1\r\n*2\r\n$3\r\n1-0\r\n:3\r\n"),                   // Fields an integer.
       }) {
    ParsedReply b(bad);
    ASSERT_NE(b.reply, nullptr) << bad;
    auto r = redis_internal::StreamEntries(b.reply);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), Status::Code::kInternal);
  }

  ParsedReply id("$15\r\n1700000000000-3\r\n");
  EXPECT_EQ(*redis_internal::StreamAppendId(id.reply), "1700000000000-3");
  for (const std::string& bad :
       {std::string("+OK\r\n"), std::string("$-1\r\n"), std::string(":5\r\n"),
        std::string("$0\r\n\r\n"), std::string("$3\r\nx-1\r\n"), std::string("*0\r\n")}) {
    ParsedReply b(bad);
    ASSERT_NE(b.reply, nullptr) << bad;
    EXPECT_EQ(redis_internal::StreamAppendId(b.reply).status().code(), Status::Code::kInternal)
        << bad;
  }

  EXPECT_EQ(redis_internal::ParseStreamId("12-3"), (std::pair<uint64_t, uint64_t>{12, 3}));
  EXPECT_EQ(redis_internal::ParseStreamId("12"), (std::pair<uint64_t, uint64_t>{12, 0}));
  EXPECT_EQ(redis_internal::ParseStreamId("18446744073709551615-18446744073709551615"),
            (std::pair<uint64_t, uint64_t>{UINT64_MAX, UINT64_MAX}));
  for (const char* bad : {"", "-", "-1", "1-", "1--2", "a-1", "1-a", "+1", "1-+2", " 1", "1.5",
                          "18446744073709551616-0"}) {
    EXPECT_FALSE(redis_internal::ParseStreamId(bad).has_value()) << bad;
  }
}

TEST_F(RedisClientTest, StreamCallsFailWithinTheCommandTimeoutWhenRedisIsDown) {
  RedisOptions o = Options();
  o.command_timeout_millis = 100;
  o.breaker_failure_threshold = 0;  // Every call goes to the (dead) server, none is rejected.
  auto client = Client(o);
  ASSERT_TRUE(AppendSync(*client, "log", "v").ok());

  auto timed = [&](auto&& call) {
    const int64_t start = NowMillis();
    const Status s = call();
    return std::make_pair(s, NowMillis() - start);
  };
  // Hung server: DeadlineExceeded, by the command timeout.
  server_.Pause();
  client->StreamAppend("log", "lost", 10, nullptr);  // Fire and forget: nothing to call.
  for (int i = 0; i < 3; ++i) {
    auto [append, append_ms] = timed([&] { return AppendSync(*client, "log", "w").status(); });
    EXPECT_EQ(append.code(), Status::Code::kDeadlineExceeded) << append.ToString();
    EXPECT_LE(append_ms, o.command_timeout_millis + kSlackMillis);
    auto [read, read_ms] = timed([&] { return ReadSync(*client, "log", "").status(); });
    EXPECT_EQ(read.code(), Status::Code::kDeadlineExceeded) << read.ToString();
    EXPECT_LE(read_ms, o.command_timeout_millis + kSlackMillis);
  }
  server_.Resume();
  // Dead server: Unavailable, at once (the connection is refused).
  server_.Kill();
  for (int i = 0; i < 3; ++i) {
    auto [append, append_ms] = timed([&] { return AppendSync(*client, "log", "w").status(); });
    EXPECT_EQ(append.code(), Status::Code::kUnavailable) << append.ToString();
    EXPECT_LE(append_ms, o.command_timeout_millis + kSlackMillis);
    auto [read, read_ms] = timed([&] { return ReadSync(*client, "log", "").status(); });
    EXPECT_EQ(read.code(), Status::Code::kUnavailable) << read.ToString();
    EXPECT_LE(read_ms, o.command_timeout_millis + kSlackMillis);
  }
  // Back (empty, no persistence): the stream works again.
  std::string error;
  ASSERT_TRUE(server_.Restart(&error)) << error;
  Result<std::string> id = Status::Unavailable("not tried");
  for (int i = 0; i < 100 && !id.ok(); ++i) {
    id = AppendSync(*client, "log", "again");
    if (!id.ok()) std::this_thread::sleep_for(20ms);
  }
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ(ValuesOf(*ReadSync(*client, "log", "")), (std::vector<std::string>{"again"}));
}

// The fake's streams answer as Redis does (ids aside, which are times): the same calls on
// both give the same values, emptiness and errors. Exact trimming in the fake is within what
// MAXLEN ~ allows, so trimming is compared by its bounds.
TEST_F(RedisClientTest, FakeClientStreamsBehaveAsRedis) {
  auto real = Client(Options());
  FakeRedisClient fake;
  for (RedisClient* c : {static_cast<RedisClient*>(real.get()), static_cast<RedisClient*>(&fake)}) {
    SCOPED_TRACE(c == &fake ? "fake" : "redis");
    std::vector<std::string> ids;
    for (int i = 0; i < 5; ++i) {
      auto id = AppendSync(*c, "log", std::string("v\0", 2) + std::to_string(i));
      ASSERT_TRUE(id.ok());
      ids.push_back(*id);
    }
    auto all = ReadSync(*c, "log", "");
    ASSERT_TRUE(all.ok());
    ExpectIncreasingIds(*all);
    ASSERT_EQ(all->size(), 5u);
    for (size_t i = 0; i < 5; ++i) {
      EXPECT_EQ((*all)[i].id, ids[i]);
      EXPECT_EQ((*all)[i].value, std::string("v\0", 2) + std::to_string(i));
    }
    EXPECT_EQ(ValuesOf(*ReadSync(*c, "log", "0-0", 2)).size(), 2u);
    EXPECT_EQ(ReadSync(*c, "log", ids[2], 1)->front().id, ids[3]);
    EXPECT_TRUE(ReadSync(*c, "log", ids[4])->empty());
    EXPECT_TRUE(ReadSync(*c, "missing", "")->empty());
    EXPECT_EQ(ReadSync(*c, "log", "", 0).status().code(), Status::Code::kInvalidArgument);
    EXPECT_EQ(ReadSync(*c, "log", "x").status().code(), Status::Code::kInvalidArgument);
    for (int i = 0; i < 400; ++i) ASSERT_TRUE(AppendSync(*c, "trim", std::to_string(i), 20).ok());
    auto trimmed = ReadSync(*c, "trim", "", 1000);
    ASSERT_TRUE(trimmed.ok());
    EXPECT_GE(trimmed->size(), 20u);
    EXPECT_LE(trimmed->size(), 20u + 100u);
    EXPECT_EQ(trimmed->back().value, "399");
  }
  EXPECT_EQ(fake.count(FakeRedisClient::Kind::kStreamAppend), 405u);
  EXPECT_EQ(fake.stream("log").size(), 5u);

  // Held: pending like the other calls, answered (or failed) by the test.
  fake.SetStreamsHeld(true);
  Result<Entries> held = Status::Internal("unanswered");
  fake.StreamRead("log", "", 10, [&](Result<Entries> r) { held = std::move(r); });
  auto call = fake.Next(FakeRedisClient::Kind::kStreamRead);
  ASSERT_TRUE(call.has_value());
  EXPECT_EQ(call->key(), "log");
  EXPECT_EQ(call->limit, 10);
  call->AnswerStreamRead({{"7-0", "x"}});
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(*held, (Entries{{"7-0", "x"}}));
  fake.StreamAppend("log", "y", 5, nullptr);
  fake.Next(FakeRedisClient::Kind::kStreamAppend)->Fail(Status::Unavailable("down"));
  EXPECT_EQ(fake.stream("log").size(), 5u);
  fake.SetStreamsHeld(false);
  fake.SetCircuitOpen(true);
  EXPECT_EQ(ReadSync(fake, "log", "").status().message(), "redis circuit open");
}

TEST_F(RedisClientTest, MetricsAreExported) {
  MetricsRegistry metrics;
  auto client = Client(Options(), &metrics);
  ASSERT_TRUE(SetSync(*client, "k", "v").ok());
  ASSERT_TRUE(GetSync(*client, "k").ok());
  const std::string text = metrics.Serialize();
  for (const char* line : {
           "tailcut_redis_commands_total{command=\"set\",result=\"ok\"} 1",
           "tailcut_redis_commands_total{command=\"get\",result=\"ok\"} 1",
           "tailcut_redis_commands_total{command=\"mget\",result=\"timeout\"} 0",
           "tailcut_redis_command_duration_seconds_count{command=\"get\"} 1",
           "tailcut_redis_breaker_state 0",
           "tailcut_redis_breaker_transitions_total{to=\"open\"} 0",
           "tailcut_redis_queue_depth 0",
           "tailcut_redis_reconnects_total 0",
       }) {
    EXPECT_NE(text.find(line), std::string::npos) << line;
  }
}

}  // namespace
}  // namespace tailcut
