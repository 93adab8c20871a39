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
#include "tests/cache/redis_server_fixture.h"

namespace tailcut {
namespace {

using namespace std::chrono_literals;
using BreakerState = RedisClient::BreakerState;
using Values = std::vector<std::optional<std::string>>;

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
