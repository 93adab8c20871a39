// SemanticCacheSync over the fake Redis's in-memory streams: entries round-trip through their
// encoding, one replica's inserts reach another's cache through the log (and the log's start at
// start-up), expired and damaged entries are skipped, and Redis failing only costs sharing.
#include "core/semantic_cache_sync.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/cache/fake_redis_client.h"

namespace tailcut {
namespace {

SemanticEntry MakeEntry(const std::string& id, int64_t created_micros) {
  SemanticEntry e;
  e.id = id;
  e.partition = "llm:0123456789abcdef";
  e.query = "What is the capital of France?";
  e.embedding = {0.6f, 0.8f, 0.0f, -0.0f};
  e.model = "llm";
  e.variant = "q4_1";
  e.pieces = {{"Par", 1}, {"is.", 2}, {"\xc3", 1}};  // A piece may end mid-character.
  e.finish_reason = "length";
  e.prompt_tokens = 31;
  e.completion_tokens = 4;
  e.created_micros = created_micros;
  return e;
}

TEST(SemanticEntryCodecTest, RoundTripsAndRefusesWhatIsNotAnEntry) {
  ManualClock clock(10'000'000);
  const SemanticEntry e = MakeEntry("abc", 4'000'000);  // 6 s old.
  const std::string encoded = EncodeSemanticEntry(e, clock);
  // Read by a process whose clock counts from elsewhere: the age is what is kept.
  ManualClock other(900'000'000);
  auto back = DecodeSemanticEntry(encoded, other);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->id, e.id);
  EXPECT_EQ(back->partition, e.partition);
  EXPECT_EQ(back->query, e.query);
  EXPECT_EQ(back->embedding, e.embedding);
  ASSERT_EQ(back->pieces.size(), 3u);
  EXPECT_EQ(back->pieces[1].text, "is.");
  EXPECT_EQ(back->pieces[1].tokens, 2);
  EXPECT_EQ(back->finish_reason, "length");
  EXPECT_EQ(back->completion_tokens, 4);
  EXPECT_NEAR(static_cast<double>(other.NowMicros() - back->created_micros), 6e6, 1e5);
  for (const char* bad : {"", "not json", "[]", "{\"v\":2}", "{\"v\":1,\"id\":\"x\"}",
                          "{\"v\":1,\"id\":\"\",\"partition\":\"p\",\"query\":\"q\","
                          "\"embedding\":[1],\"model\":\"m\",\"variant\":\"v\",\"pieces\":[],"
                          "\"finish_reason\":\"stop\",\"prompt_tokens\":1,"
                          "\"completion_tokens\":1,\"created_unix_micros\":1}"}) {
    EXPECT_FALSE(DecodeSemanticEntry(bad, clock).has_value()) << bad;
  }
}

class SemanticCacheSyncTest : public ::testing::Test {
 protected:
  std::unique_ptr<SemanticOutputCache> MakeCache() {
    SemanticCacheOptions options;
    options.enabled = true;
    options.policy = "exact";
    SemanticOutputCache::Deps deps;
    deps.clock = &clock_;
    auto cache = SemanticOutputCache::Create(options, std::move(deps));
    EXPECT_TRUE(cache.ok());
    return std::move(cache).value();
  }
  std::unique_ptr<SemanticCacheSync> MakeSync(SemanticOutputCache& cache, int64_t ttl_micros) {
    SemanticCacheSyncOptions options;
    options.poll_millis = 5;
    options.read_batch = 2;  // Several pages for a few entries.
    return std::make_unique<SemanticCacheSync>(options, redis_, cache, nullptr, ttl_micros, clock_);
  }
  static void WaitFor(const std::function<bool()>& done) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!done() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }

  const Clock& clock_ = SystemClock::Get();
  FakeRedisClient redis_;
};

TEST_F(SemanticCacheSyncTest, PublishedEntriesReachTheOtherReplicaAndItsLaterStartUp) {
  auto cache_a = MakeCache();
  auto cache_b = MakeCache();
  auto a = MakeSync(*cache_a, 0);
  auto b = MakeSync(*cache_b, 0);
  // Three entries already in the log before b starts: read at start-up, in pages of two.
  for (int i = 0; i < 3; ++i) a->Publish(MakeEntry("old" + std::to_string(i), clock_.NowMicros()));
  a->Start();
  b->Start();
  WaitFor([&] { return cache_b->stats().adopted == 3; });
  EXPECT_EQ(cache_b->stats().adopted, 3);
  a->Publish(MakeEntry("new", clock_.NowMicros()));
  WaitFor([&] { return cache_b->stats().adopted == 4; });
  EXPECT_EQ(cache_b->stats().adopted, 4);
  EXPECT_EQ(b->stats().read_failures, 0);
  EXPECT_EQ(a->stats().published, 4);
  // a reads its own entries back; the cache skips the ones it has (here: adopts, as a's
  // cache never inserted them itself; a real replica's own ids are already stored).
  WaitFor([&] { return a->stats().read == 4; });
  EXPECT_EQ(redis_.stream("semantic-cache:log").size(), 4u);
}

TEST_F(SemanticCacheSyncTest, ExpiredAndDamagedEntriesAreSkipped) {
  auto cache = MakeCache();
  auto sync = MakeSync(*cache, /*ttl_micros=*/60'000'000);
  sync->Publish(MakeEntry("stale", clock_.NowMicros() - 61'000'000));
  redis_.StreamAppend("semantic-cache:log", "{\"v\":1,\"id\":", 0, nullptr);
  sync->Publish(MakeEntry("fresh", clock_.NowMicros()));
  sync->Start();
  WaitFor([&] { return sync->stats().read == 3; });
  // Pages of two: the fresh entry is on the second page, read after the first's are done.
  WaitFor([&] { return cache->stats().adopted == 1; });
  EXPECT_EQ(sync->stats().skipped, 2);
  EXPECT_EQ(cache->stats().adopted, 1);
}

TEST_F(SemanticCacheSyncTest, RedisFailingOnlyCostsSharingAndRecovers) {
  auto cache = MakeCache();
  auto sync = MakeSync(*cache, 0);
  redis_.SetCircuitOpen(true);
  sync->Publish(MakeEntry("lost", clock_.NowMicros()));
  sync->Start();
  WaitFor([&] { return sync->stats().read_failures >= 2; });
  EXPECT_GE(sync->stats().read_failures, 2);  // It keeps polling.
  EXPECT_EQ(sync->stats().publish_failures, 1);
  redis_.SetCircuitOpen(false);
  sync->Publish(MakeEntry("kept", clock_.NowMicros()));
  WaitFor([&] { return cache->stats().adopted == 1; });
  EXPECT_EQ(cache->stats().adopted, 1);
  sync->Stop();
  const int64_t reads = sync->stats().read;
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_EQ(sync->stats().read, reads);  // Stopped: no more polls.
}

}  // namespace
}  // namespace tailcut
