// EmbeddingCache (src/core/embedding_cache.h) against its contract: what a request's items
// are answered with and what reaches the model's queue, first with L1 alone, then with a
// FakeRedisClient as L2, so that every Redis reply (a value, a miss, an error, an open
// circuit, none yet) comes when the test says, and a ManualClock for the deadlines and the
// waits for another replica. The test is the model: what the cache schedules is recorded and
// computed by hand through EmbedItemTask, as a batch worker does.
#include "core/embedding_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>

#include "cache/cached_value.h"
#include "tests/cache/fake_redis_client.h"

namespace tailcut {
namespace {

constexpr int kDims = 4;

class EmbeddingCacheTest : public ::testing::Test {
 protected:
  EmbeddingCacheTest()
      : l1_(L1CacheOptions{}, clock_, nullptr), cache_({}, &l1_, nullptr, clock_, nullptr) {}

  // A job for `n` rows whose answer lands in result_.
  std::shared_ptr<EmbedJob> Job(size_t n) {
    EmbedResult r;
    r.dimensions = kDims;
    r.variant = "fast";
    r.reference_variant = "fp32";
    r.token_counts.assign(n, 1);
    r.embeddings.resize(n * kDims);
    return std::make_shared<EmbedJob>(std::move(r), [this](Result<EmbedResult> done) {
      ASSERT_TRUE(done.ok()) << done.status().ToString();
      result_ = std::move(done).value();
    });
  }

  EmbeddingCache::Request RequestFor(std::shared_ptr<EmbedJob> job) {
    EmbeddingCache::Request req;
    req.job = std::move(job);
    req.tag = cache_.TagFor("m");
    req.model = "m";
    req.schedule =
        [this](std::vector<std::pair<EmbeddingCache::Item, std::optional<CacheTicket>>>&& items) {
          for (auto& [item, ticket] : items) scheduled_.push_back({item, ticket});
          return Status::Ok();
        };
    return req;
  }

  static CacheKey Key(uint64_t n) { return CacheKey{n, n * 31}; }

  ManualClock clock_{1'000'000};
  L1Cache l1_;
  EmbeddingCache cache_;
  std::optional<EmbedResult> result_;
  std::vector<std::pair<EmbeddingCache::Item, std::optional<CacheTicket>>> scheduled_;
};

TEST_F(EmbeddingCacheTest, ReadFirstKeyAnswersBeforeTheOwnKeyAndIsCountedAsReference) {
  const std::vector<float> reference = {1, 0, 0, 0}, fast = {0, 1, 0, 0};
  ASSERT_TRUE(l1_.Insert(Key(1), cache_.TagFor("m"), reference));  // fp32's row of text 1.
  ASSERT_TRUE(l1_.Insert(Key(2), cache_.TagFor("m"), fast));       // fast's row of text 1.
  ASSERT_TRUE(l1_.Insert(Key(4), cache_.TagFor("m"), fast));       // fast's row of text 2.
  auto job = Job(3);
  std::vector<EmbeddingCache::Item> items = {
      {0, {7}, Key(2), Key(1)},  // Both cached: the reference row wins.
      {1, {8}, Key(4), Key(3)},  // Reference missing: the item's own row.
      {2, {9}, Key(6), Key(5)},  // Neither: computed under its own key.
  };
  cache_.Resolve(RequestFor(job), std::move(items));
  ASSERT_EQ(scheduled_.size(), 1u);
  EXPECT_EQ(scheduled_[0].first.index, 2u);
  ASSERT_TRUE(scheduled_[0].second.has_value());
  EXPECT_EQ(scheduled_[0].second->key, Key(6));  // Stored under the computing variant's key.
  EXPECT_FALSE(result_.has_value());
  job->CompleteItem(2, std::vector<float>{0, 0, 1, 0});
  ASSERT_TRUE(result_.has_value());
  EXPECT_EQ(result_->cache_hits, 2);
  EXPECT_EQ(result_->reference_rows, 1);
  EXPECT_EQ(std::vector<float>(result_->embeddings.begin(), result_->embeddings.begin() + kDims),
            reference);
  EXPECT_EQ(ServedVariants(*result_), "fp32,fast");
}

TEST_F(EmbeddingCacheTest, ReadFirstKeyIsNeverWritten) {
  auto job = Job(1);
  std::vector<EmbeddingCache::Item> items = {{0, {7}, Key(2), Key(1)}};
  cache_.Resolve(RequestFor(job), std::move(items));
  ASSERT_EQ(scheduled_.size(), 1u);
  cache_.OnComputed(*scheduled_[0].second, std::vector<float>{0, 1, 0, 0});
  std::vector<float> row;
  EXPECT_TRUE(l1_.Lookup(Key(2), &row));
  EXPECT_FALSE(l1_.Lookup(Key(1), &row)) << "a fast variant's row must never land under fp32's key";
}

TEST_F(EmbeddingCacheTest, AllRowsFromTheReferenceNameOnlyIt) {
  ASSERT_TRUE(l1_.Insert(Key(1), cache_.TagFor("m"), std::vector<float>{1, 0, 0, 0}));
  auto job = Job(1);
  cache_.Resolve(RequestFor(job), {{0, {7}, Key(2), Key(1)}});
  ASSERT_TRUE(result_.has_value());
  EXPECT_EQ(ServedVariants(*result_), "fp32");
  EmbedResult none;
  none.variant = "fast";
  none.token_counts = {1};
  EXPECT_EQ(ServedVariants(none), "fast");
}

// ---- With Redis (FakeRedisClient) ----

using Kind = FakeRedisClient::Kind;
constexpr std::chrono::milliseconds kWait = FakeRedisClient::kWait;

// The answer of one request: how often it came (exactly once is the contract) and what.
class Answer {
 public:
  void Set(Result<EmbedResult> r) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++calls_;
      result_ = std::move(r);
    }
    cv_.notify_all();
  }
  // Waits for the answer (it may come from the cache's timer thread); false if none came.
  bool Wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, kWait, [&] { return calls_ > 0; });
  }
  int calls() {
    std::lock_guard<std::mutex> lock(mutex_);
    return calls_;
  }
  Status::Code code() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!result_) return Status::Code::kInternal;
    return result_->ok() ? Status::Code::kOk : result_->status().code();
  }
  // The stage timings of a successful answer (zeros otherwise).
  StageTimings timings() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!result_ || !result_->ok()) return {};
    return (*result_)->timings;
  }
  // Row `i` of a successful answer (empty otherwise).
  std::vector<float> row(size_t i = 0) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!result_ || !result_->ok()) return {};
    const auto& e = (*result_)->embeddings;
    return std::vector<float>(e.begin() + i * kDims, e.begin() + (i + 1) * kDims);
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  int calls_ = 0;
  std::optional<Result<EmbedResult>> result_;
};

// What a request asks of the cache (EmbeddingCache::Request).
struct Flags {
  bool read = true;   // False: Cache-Control no-cache.
  bool write = true;  // False: Cache-Control no-store.
  int64_t deadline_micros = 0;
};

class EmbeddingCacheL2Test : public ::testing::Test {
 protected:
  ~EmbeddingCacheL2Test() override {
    // The cache first: its timers answer what still waits on them, into this fixture.
    cache_.reset();
  }

  void Make(EmbeddingCacheOptions options = Options()) {
    options_ = options;
    cache_ = std::make_unique<EmbeddingCache>(options, &l1_, &redis_, clock_, nullptr);
  }
  // Every wait is longer than FakeRedisClient::kWait, the longest a test waits in real time
  // for something to happen: a timer that runs on any clock but the ManualClock (which only
  // the test moves) fails the test instead of passing it late.
  static EmbeddingCacheOptions Options() {
    EmbeddingCacheOptions o;
    o.remote_poll_millis = 10'000;
    o.remote_wait_millis = 60'000;
    return o;
  }
  static EmbeddingCacheOptions NoDistributed() {
    EmbeddingCacheOptions o = Options();
    o.distributed_single_flight = false;
    return o;
  }
  // A request's deadline, from now.
  static constexpr std::chrono::seconds kDeadline{20};
  int64_t Deadline() const {
    return clock_.NowMicros() + std::chrono::microseconds(kDeadline).count();
  }

  // A request for the inputs `texts` (text n has token ids {n} and key Key(n)).
  std::shared_ptr<Answer> Resolve(std::vector<uint64_t> texts, Flags flags = {}) {
    auto answer = std::make_shared<Answer>();
    EmbedResult r;
    r.dimensions = kDims;
    r.variant = "fp32";
    r.reference_variant = "fp32";
    r.token_counts.assign(texts.size(), 1);
    r.embeddings.resize(texts.size() * kDims);
    // Allocated on its own, as the contract asks: the deadline timer holds a weak_ptr to it.
    std::shared_ptr<EmbedJob> job(new EmbedJob(
        std::move(r), [answer](Result<EmbedResult> done) { answer->Set(std::move(done)); }));
    EmbeddingCache::Request req;
    req.job = job;
    req.tag = cache_->TagFor("m");
    req.model = "m";
    req.read = flags.read;
    req.write = flags.write;
    req.deadline_micros = flags.deadline_micros;
    req.schedule = [this, job](Scheduling&& items) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        for (auto& [item, ticket] : items) scheduled_.push_back({job, item, ticket});
      }
      scheduled_cv_.notify_all();
      return Status::Ok();
    };
    std::vector<EmbeddingCache::Item> items;
    for (size_t i = 0; i < texts.size(); ++i) {
      items.push_back({i, {static_cast<int64_t>(texts[i])}, Key(texts[i]), std::nullopt});
    }
    cache_->Resolve(std::move(req), std::move(items));
    return answer;
  }

  using Scheduling = std::vector<std::pair<EmbeddingCache::Item, std::optional<CacheTicket>>>;
  struct Scheduled {
    std::shared_ptr<EmbedJob> job;
    EmbeddingCache::Item item;
    std::optional<CacheTicket> ticket;
  };
  // Items the model has been given and not yet computed.
  size_t scheduled() {
    std::lock_guard<std::mutex> lock(mutex_);
    return scheduled_.size();
  }
  // The oldest of them, waiting for one if need be (the cache's timer thread schedules too).
  std::optional<Scheduled> NextScheduled() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!scheduled_cv_.wait_for(lock, kWait, [&] { return !scheduled_.empty(); })) {
      ADD_FAILURE() << "nothing was scheduled";
      return std::nullopt;
    }
    Scheduled s = std::move(scheduled_.front());
    scheduled_.erase(scheduled_.begin());
    return s;
  }
  // The model computes `s` as a batch worker does; text n's row is Row(n).
  void Compute(const Scheduled& s) {
    EmbedItemTask task(s.job, s.item.index, TokenizedInput{s.item.ids, {}}, /*variant=*/0,
                       /*normalize=*/true, clock_.NowMicros(), /*deadline_micros=*/0, s.ticket,
                       cache_.get());
    task.Complete(Row(static_cast<uint64_t>(s.item.ids.at(0))), 0, 0, 0, 1);
  }

  static CacheKey Key(uint64_t n) { return CacheKey{n, n * 31}; }
  static std::vector<float> Row(uint64_t n) { return {static_cast<float>(n), 0.5f, 0.25f, 0.125f}; }
  static std::string Stored(uint64_t n) { return EncodeEmbedding(Row(n)); }
  bool InL1(uint64_t n) {
    std::vector<float> row;
    return l1_.Lookup(Key(n), &row) && row == Row(n);
  }

  // Moves the clock, and makes the cache's timers look at it now.
  void Advance(std::chrono::microseconds d) {
    clock_.AdvanceMicros(d.count());
    cache_->PokeTimers();
  }

  // Answers the MGET of one request: nothing stored under any of its keys.
  void AllMiss() {
    auto mget = redis_.Next(Kind::kMultiGet);
    ASSERT_TRUE(mget);
    mget->AnswerMultiGet(std::vector<std::optional<std::string>>(mget->keys.size()));
  }
  // Answers the lock probe (TryLock + GET) that follows a miss with distributed single-flight.
  void Probe(bool locked, std::optional<std::string> value) {
    auto lock = redis_.Next(Kind::kTryLock);
    auto get = redis_.Next(Kind::kGet);
    ASSERT_TRUE(lock && get);
    lock->AnswerBool(locked);
    get->AnswerGet(std::move(value));
  }

  ManualClock clock_{1'000'000};
  L1Cache l1_{L1CacheOptions{}, clock_, nullptr};
  FakeRedisClient redis_;
  std::mutex mutex_;  // Guards scheduled_.
  std::condition_variable scheduled_cv_;
  std::vector<Scheduled> scheduled_;
  EmbeddingCacheOptions options_;
  std::unique_ptr<EmbeddingCache> cache_;
};

TEST_F(EmbeddingCacheL2Test, L1HitIsAnsweredWithoutRedisOrTheModel) {
  Make();
  ASSERT_TRUE(l1_.Insert(Key(1), cache_->TagFor("m"), Row(1)));
  auto a = Resolve({1});
  ASSERT_EQ(a->calls(), 1) << "an L1 hit is answered on the calling thread";
  EXPECT_EQ(a->row(), Row(1));
  EXPECT_TRUE(redis_.history().empty());
  EXPECT_EQ(scheduled(), 0u);
}

TEST_F(EmbeddingCacheL2Test, L2HitIsAnsweredAndFillsL1) {
  Make();
  auto a = Resolve({1, 2});
  auto mget = redis_.Next(Kind::kMultiGet);
  ASSERT_TRUE(mget);
  ASSERT_EQ(mget->keys.size(), 2u) << "one MGET for all of a request's L1 misses";
  EXPECT_EQ(a->calls(), 0);
  mget->AnswerMultiGet({Stored(1), Stored(2)});
  ASSERT_EQ(a->calls(), 1);
  EXPECT_EQ(a->row(0), Row(1));
  EXPECT_EQ(a->row(1), Row(2));
  EXPECT_EQ(scheduled(), 0u);
  EXPECT_TRUE(InL1(1));
  EXPECT_TRUE(InL1(2));
  // The next request for them is an L1 hit: no second round trip.
  auto b = Resolve({2});
  EXPECT_EQ(b->calls(), 1);
  EXPECT_EQ(redis_.count(Kind::kMultiGet), 1u);
}

TEST_F(EmbeddingCacheL2Test, TheRedisLookupIsInTheRequestsTimingsForItsTrace) {
  Make(NoDistributed());
  auto a = Resolve({1, 2});
  auto mget = redis_.Next(Kind::kMultiGet);
  ASSERT_TRUE(mget);
  Advance(std::chrono::microseconds(700));  // Redis takes 0.7 ms to answer.
  mget->AnswerMultiGet({Stored(1), std::nullopt});
  auto s = NextScheduled();
  ASSERT_TRUE(s);
  Compute(*s);
  ASSERT_EQ(a->calls(), 1);
  const StageTimings t = a->timings();
  EXPECT_EQ(t.redis_lookup.keys, 2);
  EXPECT_EQ(t.redis_lookup.hits, 1);
  EXPECT_EQ(t.redis_lookup.micros, 700);
  EXPECT_FALSE(t.redis_lookup.failed);
  EXPECT_GE(t.cache_micros, 700) << "the lookup is part of the cache stage";
  EXPECT_EQ(t.batch_rows, 1) << "the computed row's batch";

  // All found in Redis: the answer (given by the last row) still has the lookup and the stage.
  auto all = Resolve({4});
  mget = redis_.Next(Kind::kMultiGet);
  ASSERT_TRUE(mget);
  Advance(std::chrono::microseconds(300));
  mget->AnswerMultiGet({Stored(4)});
  ASSERT_EQ(all->calls(), 1);
  EXPECT_EQ(all->timings().redis_lookup.hits, 1);
  EXPECT_EQ(all->timings().cache_micros, 300);

  // A lookup that fails is recorded as such; an L1 hit asks Redis nothing.
  auto b = Resolve({3});
  mget = redis_.Next(Kind::kMultiGet);
  ASSERT_TRUE(mget);
  mget->Fail(Status::Unavailable("redis circuit open"));
  s = NextScheduled();
  ASSERT_TRUE(s);
  Compute(*s);
  ASSERT_EQ(b->calls(), 1);
  EXPECT_TRUE(b->timings().redis_lookup.failed);
  EXPECT_EQ(b->timings().redis_lookup.keys, 1);
  auto c = Resolve({1});
  ASSERT_EQ(c->calls(), 1);
  EXPECT_EQ(c->timings().redis_lookup.keys, 0);
  EXPECT_EQ(c->timings().batch_rows, 0);
}

TEST_F(EmbeddingCacheL2Test, MissIsComputedOnceAndStoredInL1AndL2) {
  Make(NoDistributed());
  auto a = Resolve({1});
  auto mget = redis_.Next(Kind::kMultiGet);
  ASSERT_TRUE(mget);
  const std::string l2_key = mget->key();
  mget->AnswerMultiGet({std::nullopt});
  auto s = NextScheduled();
  ASSERT_TRUE(s);
  EXPECT_EQ(scheduled(), 0u);
  EXPECT_EQ(a->calls(), 0);
  Compute(*s);
  ASSERT_EQ(a->calls(), 1);
  EXPECT_EQ(a->code(), Status::Code::kOk);
  EXPECT_EQ(a->row(), Row(1));
  EXPECT_TRUE(InL1(1));
  auto set = redis_.Next(Kind::kSet);
  ASSERT_TRUE(set);
  EXPECT_EQ(set->key(), l2_key) << "stored where a lookup of the same input reads";
  auto decoded = DecodeEmbedding(set->value, kDims);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(*decoded, Row(1));
}

TEST_F(EmbeddingCacheL2Test, NoStoreComputesAndAnswersButStoresNowhere) {
  Make(NoDistributed());
  // A computed row.
  auto a = Resolve({1}, {.write = false});
  AllMiss();
  auto s = NextScheduled();
  ASSERT_TRUE(s);
  Compute(*s);
  ASSERT_EQ(a->calls(), 1);
  EXPECT_EQ(a->row(), Row(1));
  EXPECT_FALSE(InL1(1));
  EXPECT_EQ(redis_.count(Kind::kSet), 0u);
  // And a row read from L2 is not copied into L1 either.
  auto b = Resolve({2}, {.write = false});
  auto mget = redis_.Next(Kind::kMultiGet);
  ASSERT_TRUE(mget);
  mget->AnswerMultiGet({Stored(2)});
  ASSERT_EQ(b->calls(), 1);
  EXPECT_EQ(b->row(), Row(2));
  EXPECT_FALSE(InL1(2));
}

TEST_F(EmbeddingCacheL2Test, NoCacheReadsNothingJoinsNothingAndStoresItsFreshRow) {
  Make(NoDistributed());
  ASSERT_TRUE(l1_.Insert(Key(1), cache_->TagFor("m"), std::vector<float>{9, 9, 9, 9}));
  // A reading request for text 2 leads its computation...
  auto leader = Resolve({2});
  AllMiss();
  auto led = NextScheduled();
  ASSERT_TRUE(led);
  // ...and a no-cache request for texts 1 (cached) and 2 (in flight) computes both itself,
  // with no Redis lookup.
  auto fresh = Resolve({1, 2}, {.read = false});
  EXPECT_EQ(redis_.count(Kind::kMultiGet), 1u);
  auto s1 = NextScheduled();
  auto s2 = NextScheduled();
  ASSERT_TRUE(s1 && s2);
  Compute(*s1);
  Compute(*s2);
  ASSERT_EQ(fresh->calls(), 1);
  EXPECT_EQ(fresh->row(0), Row(1));
  EXPECT_EQ(fresh->row(1), Row(2));
  EXPECT_TRUE(InL1(1)) << "the fresh row replaces the cached one";
  EXPECT_EQ(leader->calls(), 0) << "the leader's own computation is still to come";
  Compute(*led);
  EXPECT_EQ(leader->calls(), 1);
}

TEST_F(EmbeddingCacheL2Test, IdenticalConcurrentMissesComputeOnce) {
  Make(NoDistributed());
  auto a = Resolve({1});
  auto b = Resolve({1});
  AllMiss();  // a's lookup.
  AllMiss();  // b's: a is computing it by now.
  auto s = NextScheduled();
  ASSERT_TRUE(s);
  EXPECT_EQ(scheduled(), 0u) << "the second miss waits for the first one's computation";
  EXPECT_EQ(b->calls(), 0);
  Compute(*s);
  ASSERT_EQ(a->calls(), 1);
  ASSERT_EQ(b->calls(), 1);
  EXPECT_EQ(a->row(), Row(1));
  EXPECT_EQ(b->row(), Row(1));
  EXPECT_EQ(redis_.count(Kind::kSet), 1u);
}

TEST_F(EmbeddingCacheL2Test, MissThatLeadsAfterAnEarlierFlightEndedTakesItsRowFromL1) {
  Make(NoDistributed());
  auto a = Resolve({1});
  auto b = Resolve({1});  // Its L1 look is done: a miss; its MGET is out.
  AllMiss();              // a's lookup: a leads.
  auto s = NextScheduled();
  ASSERT_TRUE(s);
  Compute(*s);  // a's row is in L1 and its flight has ended...
  ASSERT_EQ(a->calls(), 1);
  AllMiss();  // ...before Redis answers b (its SET came after b's MGET).
  ASSERT_EQ(b->calls(), 1) << "b found a's row in L1 instead of computing it again";
  EXPECT_EQ(b->row(), Row(1));
  EXPECT_EQ(scheduled(), 0u);
}

TEST_F(EmbeddingCacheL2Test, LockHolderComputesStoresAndThenReleasesItsOwnLock) {
  Make();
  auto a = Resolve({1});
  AllMiss();
  auto lock = redis_.Next(Kind::kTryLock);
  auto get = redis_.Next(Kind::kGet);
  ASSERT_TRUE(lock && get);
  EXPECT_EQ(lock->ttl, options_.lock_ttl_millis);
  const std::string lock_key = lock->key(), token = lock->value;
  EXPECT_FALSE(token.empty());
  lock->AnswerBool(true);
  get->AnswerGet(std::nullopt);  // No other replica stored it meanwhile.
  auto s = NextScheduled();
  ASSERT_TRUE(s);
  EXPECT_EQ(redis_.count(Kind::kUnlock), 0u) << "held while computing";
  Compute(*s);
  ASSERT_EQ(a->calls(), 1);
  EXPECT_EQ(a->row(), Row(1));
  auto unlock = redis_.Next(Kind::kUnlock);
  ASSERT_TRUE(unlock);
  EXPECT_EQ(unlock->key(), lock_key);
  EXPECT_EQ(unlock->value, token) << "released by its owner's token only";
  unlock->AnswerBool(true);
  // The value is stored before the lock goes: a replica that sees the lock gone finds it.
  const auto history = redis_.history();
  auto at = [&](Kind k) {
    return std::find_if(history.begin(), history.end(), [k](const auto& c) { return c.kind == k; });
  };
  ASSERT_NE(at(Kind::kSet), history.end());
  EXPECT_LT(at(Kind::kSet) - history.begin(), at(Kind::kUnlock) - history.begin());
  EXPECT_TRUE(InL1(1));
}

TEST_F(EmbeddingCacheL2Test, ValueStoredBetweenLookupAndLockIsTakenNotComputed) {
  Make();
  auto a = Resolve({1});
  AllMiss();
  Probe(/*locked=*/true, Stored(1));  // Another replica stored it and released its lock.
  ASSERT_EQ(a->calls(), 1);
  EXPECT_EQ(a->row(), Row(1));
  EXPECT_EQ(scheduled(), 0u);
  auto unlock = redis_.Next(Kind::kUnlock);  // The lock it took all the same is given back.
  ASSERT_TRUE(unlock);
}

TEST_F(EmbeddingCacheL2Test, LockHeldByAnotherReplicaWaitsForItsValueInL2) {
  Make();
  auto a = Resolve({1});
  auto b = Resolve({1});  // The same input in this process: waits for a.
  AllMiss();
  AllMiss();
  Probe(/*locked=*/false, std::nullopt);
  EXPECT_EQ(redis_.pending(Kind::kGet), 0u) << "polls are paced by the clock";
  for (int poll = 0; poll < 3; ++poll) {
    Advance(std::chrono::milliseconds(options_.remote_poll_millis));
    auto get = redis_.Next(Kind::kGet);
    ASSERT_TRUE(get);
    if (poll < 2) {
      get->AnswerGet(std::nullopt);  // Still computing over there.
      EXPECT_EQ(a->calls(), 0);
    } else {
      get->AnswerGet(Stored(1));
    }
  }
  ASSERT_EQ(a->calls(), 1);
  ASSERT_EQ(b->calls(), 1);
  EXPECT_EQ(a->row(), Row(1));
  EXPECT_EQ(b->row(), Row(1));
  EXPECT_EQ(scheduled(), 0u) << "computed once, by the other replica";
  EXPECT_EQ(redis_.count(Kind::kUnlock), 0u) << "not this replica's lock";
  EXPECT_TRUE(InL1(1));
}

TEST_F(EmbeddingCacheL2Test, LockHolderThatDiedIsReplacedAfterRemoteWait) {
  EmbeddingCacheOptions o = Options();
  o.remote_wait_millis = 5 * o.remote_poll_millis;
  Make(o);
  auto a = Resolve({1});
  AllMiss();
  const int64_t give_up = clock_.NowMicros() + o.remote_wait_millis * 1000;
  Probe(/*locked=*/false, std::nullopt);
  for (int poll = 0; scheduled() == 0; ++poll) {
    ASSERT_LT(poll, 20) << "never computed itself";
    EXPECT_LT(clock_.NowMicros(), give_up) << "waited past remote_wait_millis";
    Advance(std::chrono::milliseconds(o.remote_poll_millis));
    auto get = redis_.Next(Kind::kGet);
    ASSERT_TRUE(get);
    get->AnswerGet(std::nullopt);  // The holder never stores it.
  }
  EXPECT_GE(clock_.NowMicros(), give_up) << "gave up before remote_wait_millis";
  auto s = NextScheduled();
  ASSERT_TRUE(s);
  Compute(*s);
  ASSERT_EQ(a->calls(), 1);
  EXPECT_EQ(a->row(), Row(1));
  EXPECT_EQ(redis_.count(Kind::kSet), 1u);
}

// ---- Every L2 failure is a miss ----

TEST_F(EmbeddingCacheL2Test, FailedLookupIsAMiss) {
  Make(NoDistributed());
  auto a = Resolve({1});
  auto mget = redis_.Next(Kind::kMultiGet);
  ASSERT_TRUE(mget);
  mget->Fail(Status::DeadlineExceeded("redis command timed out"));
  auto s = NextScheduled();
  ASSERT_TRUE(s);
  Compute(*s);
  ASSERT_EQ(a->calls(), 1);
  EXPECT_EQ(a->code(), Status::Code::kOk);
  EXPECT_EQ(a->row(), Row(1));
}

TEST_F(EmbeddingCacheL2Test, DamagedValueIsAMissAndIsOverwritten) {
  Make(NoDistributed());
  auto a = Resolve({1});
  auto mget = redis_.Next(Kind::kMultiGet);
  ASSERT_TRUE(mget);
  std::string damaged = Stored(1);
  damaged.back() ^= 0x40;
  mget->AnswerMultiGet({damaged});
  auto s = NextScheduled();
  ASSERT_TRUE(s);
  Compute(*s);
  ASSERT_EQ(a->calls(), 1);
  EXPECT_EQ(a->row(), Row(1));
  auto set = redis_.Next(Kind::kSet);
  ASSERT_TRUE(set);
  EXPECT_EQ(set->key(), mget->key());
  EXPECT_EQ(set->value, Stored(1));
}

TEST_F(EmbeddingCacheL2Test, OpenCircuitIsAMissOnTheCallersThread) {
  Make();
  redis_.SetCircuitOpen(true);
  auto a = Resolve({1});
  // Every Redis call was refused at once, so the model has it before Resolve returned.
  ASSERT_EQ(scheduled(), 1u);
  auto s = NextScheduled();
  ASSERT_TRUE(s);
  Compute(*s);
  ASSERT_EQ(a->calls(), 1);
  EXPECT_EQ(a->code(), Status::Code::kOk);
  EXPECT_EQ(a->row(), Row(1));
  EXPECT_TRUE(InL1(1));
  EXPECT_EQ(redis_.count(Kind::kUnlock), 0u) << "no lock was taken";
}

TEST_F(EmbeddingCacheL2Test, FailedLockProbeComputesHere) {
  Make();
  auto a = Resolve({1});
  AllMiss();
  auto lock = redis_.Next(Kind::kTryLock);
  auto get = redis_.Next(Kind::kGet);
  ASSERT_TRUE(lock && get);
  // The replies may come in either order; here the GET's first.
  get->Fail(Status::Unavailable("connection lost"));
  EXPECT_EQ(scheduled(), 0u) << "decided once both replies are in";
  lock->Fail(Status::Unavailable("connection lost"));
  auto s = NextScheduled();
  ASSERT_TRUE(s);
  Compute(*s);
  ASSERT_EQ(a->calls(), 1);
  EXPECT_EQ(a->row(), Row(1));
  EXPECT_EQ(redis_.count(Kind::kUnlock), 0u) << "no lock was taken";
}

TEST_F(EmbeddingCacheL2Test, FailedPollForAnotherReplicaComputesHere) {
  Make();
  auto a = Resolve({1});
  AllMiss();
  Probe(/*locked=*/false, std::nullopt);
  Advance(std::chrono::milliseconds(options_.remote_poll_millis));
  auto get = redis_.Next(Kind::kGet);
  ASSERT_TRUE(get);
  get->Fail(Status::DeadlineExceeded("redis command timed out"));
  ASSERT_EQ(scheduled(), 1u) << "no waiting out remote_wait_millis on a failing Redis";
  auto s = NextScheduled();
  ASSERT_TRUE(s);
  Compute(*s);
  ASSERT_EQ(a->calls(), 1);
  EXPECT_EQ(a->row(), Row(1));
}

// ---- Deadlines: a waiting request fails at its deadline, wherever it waits ----

TEST_F(EmbeddingCacheL2Test, DeadlineWhileWaitingForL2) {
  Make(NoDistributed());
  auto a = Resolve({1}, {.deadline_micros = Deadline()});
  auto b = Resolve({2}, {.deadline_micros = Deadline() + 1});
  auto mget_a = redis_.Next(Kind::kMultiGet);
  auto mget_b = redis_.Next(Kind::kMultiGet);
  ASSERT_TRUE(mget_a && mget_b);
  Advance(kDeadline - std::chrono::microseconds(1));
  EXPECT_EQ(a->calls(), 0);
  Advance(std::chrono::microseconds(1));
  ASSERT_TRUE(a->Wait()) << "not failed at its deadline";
  EXPECT_EQ(a->code(), Status::Code::kDeadlineExceeded);
  EXPECT_EQ(b->calls(), 0) << "a later deadline is not disturbed";
  // The late reply changes nothing for a, and b is served as usual.
  mget_a->AnswerMultiGet({Stored(1)});
  mget_b->AnswerMultiGet({Stored(2)});
  EXPECT_EQ(a->calls(), 1);
  ASSERT_EQ(b->calls(), 1);
  EXPECT_EQ(b->code(), Status::Code::kOk);
  EXPECT_EQ(b->row(), Row(2));
}

TEST_F(EmbeddingCacheL2Test, DeadlineWhileWaitingForAnotherRequestsComputation) {
  Make(NoDistributed());
  auto leader = Resolve({1});
  auto waiter = Resolve({1}, {.deadline_micros = Deadline()});
  AllMiss();
  AllMiss();
  auto s = NextScheduled();
  ASSERT_TRUE(s);
  Advance(kDeadline);
  ASSERT_TRUE(waiter->Wait());
  EXPECT_EQ(waiter->code(), Status::Code::kDeadlineExceeded);
  EXPECT_EQ(leader->calls(), 0);
  Compute(*s);
  ASSERT_EQ(leader->calls(), 1);
  EXPECT_EQ(leader->row(), Row(1));
  EXPECT_EQ(waiter->calls(), 1);
}

TEST_F(EmbeddingCacheL2Test, LeadersDeadlineDoesNotFailItsWaiters) {
  Make(NoDistributed());
  auto leader = Resolve({1}, {.deadline_micros = Deadline()});
  auto waiter = Resolve({1});
  AllMiss();
  AllMiss();
  auto s = NextScheduled();
  ASSERT_TRUE(s);
  Advance(kDeadline);
  ASSERT_TRUE(leader->Wait());
  EXPECT_EQ(leader->code(), Status::Code::kDeadlineExceeded);
  EXPECT_EQ(waiter->calls(), 0);
  Compute(*s);  // The row still comes (it was already in a batch).
  ASSERT_EQ(waiter->calls(), 1);
  EXPECT_EQ(waiter->row(), Row(1));
  EXPECT_EQ(leader->calls(), 1);
}

TEST_F(EmbeddingCacheL2Test, DeadlineWhileWaitingForAnotherReplica) {
  Make();
  auto a = Resolve({1}, {.deadline_micros = Deadline()});
  auto b = Resolve({1});  // Waits for a, which waits for the other replica.
  AllMiss();
  AllMiss();
  Probe(/*locked=*/false, std::nullopt);
  ASSERT_LT(kDeadline, std::chrono::milliseconds(options_.remote_wait_millis))
      << "the deadline must come first";
  Advance(kDeadline);
  ASSERT_TRUE(a->Wait());
  EXPECT_EQ(a->code(), Status::Code::kDeadlineExceeded);
  EXPECT_EQ(b->calls(), 0);
  // b is not failed with a: it takes over (a poll that was in flight finds no value yet).
  if (redis_.pending(Kind::kGet) > 0) redis_.Next(Kind::kGet)->AnswerGet(std::nullopt);
  Advance(std::chrono::milliseconds(options_.remote_poll_millis));
  auto s = NextScheduled();
  ASSERT_TRUE(s);
  Compute(*s);
  ASSERT_EQ(b->calls(), 1);
  EXPECT_EQ(b->code(), Status::Code::kOk);
  EXPECT_EQ(b->row(), Row(1));
  EXPECT_EQ(a->calls(), 1);
}

TEST_F(EmbeddingCacheL2Test, DeadlineWhileQueuedForTheModel) {
  Make(NoDistributed());
  auto a = Resolve({1}, {.deadline_micros = Deadline()});
  auto b = Resolve({2});
  AllMiss();
  AllMiss();
  auto sa = NextScheduled();
  auto sb = NextScheduled();
  ASSERT_TRUE(sa && sb);
  Advance(kDeadline);
  ASSERT_TRUE(a->Wait());
  EXPECT_EQ(a->code(), Status::Code::kDeadlineExceeded);
  EXPECT_EQ(b->calls(), 0);
  Compute(*sa);
  Compute(*sb);
  EXPECT_EQ(a->calls(), 1);
  ASSERT_EQ(b->calls(), 1);
  EXPECT_EQ(b->row(), Row(2));
}

}  // namespace
}  // namespace tailcut
