// Redis Cluster routing: slots, hash tags, address lists, CLUSTER SLOTS and redirect parsing
// as pure functions; then RedisClusterClient against a real local cluster (3 masters, 3
// replicas; redis_cluster_fixture.h): MultiGet across slots, MOVED after a slot is moved,
// ASK during a slot's migration, DeleteByPattern on every master, a stream's appends and reads
// following it to its new master, and a master killed under calls (every callback on time,
// answers right, service back after the failover).
#include "cache/redis_cluster_client.h"

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "cache/redis_cluster_slots.h"
#include "tests/cache/await_callback.h"
#include "tests/cache/parsed_reply.h"
#include "tests/cache/redis_cluster_fixture.h"

namespace tailcut {
namespace {

using namespace std::chrono_literals;
using Values = std::vector<std::optional<std::string>>;

// ---- Pure functions. ----

TEST(RedisClusterSlotsTest, Crc16AndSlotsMatchRedis) {
  // The cluster specification's check value, and slots CLUSTER KEYSLOT gives.
  EXPECT_EQ(RedisCrc16("123456789"), 0x31C3);
  EXPECT_EQ(RedisKeySlot("123456789"), 0x31C3);
  EXPECT_EQ(RedisKeySlot("somekey"), 11058);
  EXPECT_EQ(RedisKeySlot("foo{hash_tag}"), 2515);
  EXPECT_EQ(RedisKeySlot(""), 0);
  EXPECT_EQ(RedisKeySlot("{user1000}.following"), RedisKeySlot("{user1000}.followers"));
  EXPECT_EQ(RedisKeySlot("{user1000}.following"), RedisKeySlot("user1000"));
}

TEST(RedisClusterSlotsTest, HashTagEdgeCases) {
  EXPECT_EQ(RedisHashTag("plain"), "plain");
  EXPECT_EQ(RedisHashTag("{user1000}.following"), "user1000");
  EXPECT_EQ(RedisHashTag("foo{bar}{zap}"), "bar");      // The first tag only.
  EXPECT_EQ(RedisHashTag("foo{{bar}}zap"), "{bar");     // Up to the first '}'.
  EXPECT_EQ(RedisHashTag("foo{}{bar}"), "foo{}{bar}");  // Empty tag: the whole key.
  EXPECT_EQ(RedisHashTag("foo{bar"), "foo{bar");        // '{' without '}': the whole key.
  EXPECT_EQ(RedisHashTag("foo}bar{"), "foo}bar{");      // '}' before '{' closes nothing.
  EXPECT_EQ(RedisHashTag(std::string_view("a{\0}b", 5)), std::string_view("\0", 1));
}

TEST(RedisClusterSlotsTest, NodeListsParseOrSayWhatIsWrong) {
  auto list = ParseRedisNodeList("127.0.0.1:7000, redis-1.local:7001,[::1]:7002");
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->size(), 3u);
  EXPECT_EQ((*list)[0], (RedisNodeAddress{"127.0.0.1", 7000}));
  EXPECT_EQ((*list)[1], (RedisNodeAddress{"redis-1.local", 7001}));
  EXPECT_EQ((*list)[2], (RedisNodeAddress{"::1", 7002}));
  EXPECT_EQ((*list)[2].ToString(), "[::1]:7002");
  for (const char* bad : {"", "host", "host:", ":7000", "host:0", "host:65536", "host:70x",
                          "a:1,,b:2", "a:1,", "::1:7000", "[::1]7000"}) {
    auto r = ParseRedisNodeList(bad);
    EXPECT_FALSE(r.ok()) << "'" << bad << "' parsed";
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
    }
  }
}

using testing::ParsedReply;  // A reply from RESP text (parsed_reply.h).

TEST(RedisClusterSlotsTest, ClusterSlotsRepliesParse) {
  // Two ranges; the second's master has an unknown address ("" host: the answering node's).
  const std::string resp =
      "*2\r\n"
      "*4\r\n:0\r\n:5460\r\n"
      "*3\r\n$9\r\n127.0.0.1\r\n:7000\r\n$3\r\nid0\r\n"
      "*3\r\n$9\r\n127.0.0.1\r\n:7003\r\n$3\r\nid3\r\n"
      "*3\r\n:5461\r\n:16383\r\n"
      "*4\r\n$0\r\n\r\n:7001\r\n$3\r\nid1\r\n*0\r\n";
  ParsedReply r(resp);
  ASSERT_NE(r.reply, nullptr);
  auto ranges = ParseClusterSlots(r.reply, RedisNodeAddress{"10.0.0.9", 7001});
  ASSERT_TRUE(ranges.ok()) << ranges.status().ToString();
  ASSERT_EQ(ranges->size(), 2u);
  EXPECT_EQ((*ranges)[0].first, 0);
  EXPECT_EQ((*ranges)[0].last, 5460);
  EXPECT_EQ((*ranges)[0].master, (RedisNodeAddress{"127.0.0.1", 7000}));
  ASSERT_EQ((*ranges)[0].replicas.size(), 1u);
  EXPECT_EQ((*ranges)[0].replicas[0], (RedisNodeAddress{"127.0.0.1", 7003}));
  EXPECT_EQ((*ranges)[1].first, 5461);
  EXPECT_EQ((*ranges)[1].last, 16383);
  EXPECT_EQ((*ranges)[1].master, (RedisNodeAddress{"10.0.0.9", 7001}));
  EXPECT_TRUE((*ranges)[1].replicas.empty());

  for (const std::string& bad : {
           std::string("+OK\r\n"),
           std::string("*1\r\n*2\r\n:0\r\n:5\r\n"),                               // No master.
           std::string("*1\r\n*3\r\n:9\r\n:5\r\n*2\r\n$1\r\na\r\n:1\r\n"),        // first > last.
           std::string("*1\r\n*3\r\n:0\r\n:16384\r\n*2\r\n$1\r\na\r\n:1\r\n"),    // Past 16383.
           std::string("*1\r\n*3\r\n:0\r\n:5\r\n*2\r\n$1\r\na\r\n$2\r\n70\r\n"),  // Port text.
       }) {
    ParsedReply b(bad);
    ASSERT_NE(b.reply, nullptr);
    EXPECT_FALSE(ParseClusterSlots(b.reply, RedisNodeAddress{"h", 1}).ok()) << bad;
  }
}

TEST(RedisClusterSlotsTest, RedirectsParse) {
  const RedisNodeAddress from{"10.0.0.5", 7000};
  auto moved = ParseRedisRedirect("MOVED 3999 127.0.0.1:6381", from);
  ASSERT_TRUE(moved.has_value());
  EXPECT_EQ(moved->kind, RedisRedirect::Kind::kMoved);
  EXPECT_EQ(moved->slot, 3999);
  EXPECT_EQ(moved->target, (RedisNodeAddress{"127.0.0.1", 6381}));
  auto ask = ParseRedisRedirect("ASK 12182 :6382", from);  // Unknown endpoint: same host.
  ASSERT_TRUE(ask.has_value());
  EXPECT_EQ(ask->kind, RedisRedirect::Kind::kAsk);
  EXPECT_EQ(ask->slot, 12182);
  EXPECT_EQ(ask->target, (RedisNodeAddress{"10.0.0.5", 6382}));
  for (const char* other : {"ERR unknown command", "MOVED", "MOVED x 1.2.3.4:5", "MOVED 16384 a:1",
                            "ASK 1 nohost", "CROSSSLOT Keys in request don't hash to the same slot",
                            "TRYAGAIN Multiple keys request during rehashing of slot"}) {
    EXPECT_FALSE(ParseRedisRedirect(other, from).has_value()) << other;
  }
}

TEST(RedisClusterSlotsTest, CreateRefusesBadConfiguration) {
  RedisOptions o;
  o.cluster_nodes = "";
  EXPECT_FALSE(RedisClusterClient::Create(o, SystemClock::Get(), nullptr).ok());
  o.cluster_nodes = "127.0.0.1:1";
  o.db = 2;
  auto r = RedisClusterClient::Create(o, SystemClock::Get(), nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("db must be 0"), std::string::npos);
}

// ---- Against a real cluster. ----

class RedisClusterClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    ASSERT_TRUE(cluster_.Start(/*masters=*/3, /*replicas=*/1, /*node_timeout_millis=*/500, &error))
        << error;
  }

  RedisOptions Options() {
    RedisOptions o;
    o.cluster_nodes = cluster_.Seeds(2);  // Two seeds: the rest are learnt.
    o.key_prefix = "test";
    o.command_timeout_millis = 200;  // Room for redirects on 2 shared cores.
    o.breaker_open_millis = 200;
    // Long enough that these tests see MOVED/ASK followed, not a timely periodic refresh.
    o.cluster_topology_refresh_millis = 60'000;
    return o;
  }
  std::unique_ptr<RedisClusterClient> Client(const RedisOptions& o, MetricsRegistry* m = nullptr) {
    auto c = RedisClusterClient::Create(o, SystemClock::Get(), m);
    if (!c.ok()) throw std::runtime_error(c.status().ToString());
    auto client = std::move(c).value();
    const Status s = Await<Status>([&](auto cb) { client->RefreshTopology(cb); });
    if (!s.ok()) throw std::runtime_error(s.ToString());
    return client;
  }

  static Status SetSync(RedisClient& c, std::string key, std::string value) {
    return Await<Status>([&](auto cb) { c.Set(std::move(key), std::move(value), 0, cb); });
  }
  static Result<std::optional<std::string>> GetSync(RedisClient& c, std::string key) {
    return Await<Result<std::optional<std::string>>>([&](auto cb) { c.Get(std::move(key), cb); });
  }
  static Result<Values> MultiGetSync(RedisClient& c, std::vector<std::string> keys) {
    return Await<Result<Values>>([&](auto cb) { c.MultiGet(std::move(keys), cb); });
  }
  static Result<int64_t> DeleteSync(RedisClient& c, std::string pattern) {
    return Await<Result<int64_t>>([&](auto cb) { c.DeleteByPattern(std::move(pattern), cb); });
  }

  // Moves `slot` from master `from` to master `to` the way redis-cli --cluster reshard does:
  // IMPORTING/MIGRATING, MIGRATE of its keys, then SETSLOT NODE on both and every master.
  // With `finish` false it stops after MIGRATE (the slot mid-migration: ASK territory).
  void MoveSlot(int slot, int from, int to, bool finish) {
    auto& src = cluster_.node(static_cast<size_t>(from));
    auto& dst = cluster_.node(static_cast<size_t>(to));
    const std::string src_id = cluster_.NodeId(static_cast<size_t>(from));
    const std::string dst_id = cluster_.NodeId(static_cast<size_t>(to));
    const std::string s = std::to_string(slot);
    ASSERT_EQ(dst.CommandText({"CLUSTER", "SETSLOT", s, "IMPORTING", src_id}), "OK");
    ASSERT_EQ(src.CommandText({"CLUSTER", "SETSLOT", s, "MIGRATING", dst_id}), "OK");
    while (true) {
      auto keys = src.Command({"CLUSTER", "GETKEYSINSLOT", s, "100"});
      ASSERT_NE(keys, nullptr);
      ASSERT_EQ(keys->type, REDIS_REPLY_ARRAY);
      if (keys->elements == 0) break;
      std::vector<std::string> migrate{"MIGRATE", "127.0.0.1", std::to_string(dst.port()), "", "0",
                                       "5000",    "KEYS"};
      for (size_t i = 0; i < keys->elements; ++i) {
        migrate.emplace_back(keys->element[i]->str, keys->element[i]->len);
      }
      ASSERT_EQ(src.CommandText(migrate), "OK");
    }
    if (!finish) return;
    ASSERT_EQ(dst.CommandText({"CLUSTER", "SETSLOT", s, "NODE", dst_id}), "OK");
    ASSERT_EQ(src.CommandText({"CLUSTER", "SETSLOT", s, "NODE", dst_id}), "OK");
    for (int m : cluster_.Masters(static_cast<size_t>(to))) {
      cluster_.node(static_cast<size_t>(m)).CommandText({"CLUSTER", "SETSLOT", s, "NODE", dst_id});
    }
  }

  testing::RedisCluster cluster_;
};

TEST_F(RedisClusterClientTest, MultiGetAcrossSlotsReturnsEveryValueInOrder) {
  MetricsRegistry metrics;
  auto client = Client(Options(), &metrics);
  std::vector<std::string> keys;
  std::set<int> masters;
  for (int i = 0; i < 200; ++i) {
    keys.push_back("k" + std::to_string(i));
    ASSERT_TRUE(SetSync(*client, keys.back(), "v" + std::to_string(i)).ok());
    masters.insert(cluster_.MasterOfSlot(RedisKeySlot(client->PrefixedKey(keys.back()))));
  }
  EXPECT_EQ(masters.size(), 3u);  // The keys really are spread over the three masters.
  // Our slots are the server's (CLUSTER KEYSLOT), tags and odd bytes included.
  for (const std::string& k : {std::string("test:k1"), std::string("{a}b"), std::string("x{}{y}"),
                               std::string("z{"), std::string("\xff\0{\x01}", 5)}) {
    EXPECT_EQ(cluster_.node(0).CommandText({"CLUSTER", "KEYSLOT", k}),
              std::to_string(RedisKeySlot(k)));
  }
  // Each key is on the master its slot names (GET on that node, no redirect).
  for (int i = 0; i < 200; i += 37) {
    const std::string k = client->PrefixedKey(keys[static_cast<size_t>(i)]);
    auto& owner = cluster_.node(static_cast<size_t>(cluster_.MasterOfSlot(RedisKeySlot(k))));
    EXPECT_EQ(owner.CommandText({"GET", k}), "v" + std::to_string(i));
  }

  // Shuffled, with misses in between: the answer follows the order asked.
  std::vector<std::string> asked = keys;
  for (int i = 0; i < 20; ++i) asked.push_back("missing" + std::to_string(i));
  std::shuffle(asked.begin(), asked.end(), std::mt19937(42));
  auto values = MultiGetSync(*client, asked);
  ASSERT_TRUE(values.ok()) << values.status().ToString();
  ASSERT_EQ(values->size(), asked.size());
  for (size_t i = 0; i < asked.size(); ++i) {
    if (asked[i].starts_with("missing")) {
      EXPECT_EQ((*values)[i], std::nullopt) << asked[i];
    } else {
      EXPECT_EQ((*values)[i], "v" + asked[i].substr(1)) << asked[i];
    }
  }
  // Hash-tagged keys share a slot: one MGET for them.
  ASSERT_TRUE(SetSync(*client, "{req}.a", "A").ok());
  ASSERT_TRUE(SetSync(*client, "{req}.b", "B").ok());
  auto tagged = MultiGetSync(*client, {"{req}.b", "{req}.a", "{req}.c"});
  ASSERT_TRUE(tagged.ok());
  EXPECT_EQ(*tagged, (Values{"B", "A", std::nullopt}));

  // Locks route by their own key; the compare-and-delete script runs on its master.
  auto locked = Await<Result<bool>>([&](auto cb) { client->TryLock("lock:x", "t1", 5000, cb); });
  ASSERT_TRUE(locked.ok());
  EXPECT_TRUE(*locked);
  auto again = Await<Result<bool>>([&](auto cb) { client->TryLock("lock:x", "t2", 5000, cb); });
  EXPECT_FALSE(*again);
  EXPECT_FALSE(*Await<Result<bool>>([&](auto cb) { client->Unlock("lock:x", "t2", cb); }));
  EXPECT_TRUE(*Await<Result<bool>>([&](auto cb) { client->Unlock("lock:x", "t1", cb); }));
  EXPECT_TRUE(Await<Status>([&](auto cb) { client->Ping(cb); }).ok());

  EXPECT_EQ(client->breaker_state(), RedisClient::BreakerState::kClosed);
  const auto cs = client->cluster_stats();
  EXPECT_EQ(cs.moved, 0u);  // The map came first: nothing was misrouted.
  const std::string text = metrics.Serialize();
  EXPECT_NE(text.find("tailcut_redis_cluster_masters 3"), std::string::npos) << text;
  EXPECT_NE(text.find("tailcut_redis_commands_total{command=\"mget\",result=\"ok\"} 2"),
            std::string::npos);
  EXPECT_NE(text.find("tailcut_redis_breaker_state 0"), std::string::npos);
}

TEST_F(RedisClusterClientTest, FirstCallsBeforeTheMapFollowMoved) {
  RedisOptions o = Options();
  o.cluster_nodes = cluster_.Seeds(1);
  auto made = RedisClusterClient::Create(o, SystemClock::Get(), nullptr);
  ASSERT_TRUE(made.ok());
  auto client = std::move(made).value();
  // Whether or not the first fetch is back yet, every call lands on its slot's master.
  for (int i = 0; i < 30; ++i) {
    ASSERT_TRUE(SetSync(*client, "early" + std::to_string(i), "e").ok()) << i;
  }
  auto values = MultiGetSync(*client, {"early0", "early7", "early29"});
  ASSERT_TRUE(values.ok());
  EXPECT_EQ(*values, (Values{"e", "e", "e"}));
}

TEST_F(RedisClusterClientTest, MovedAfterReshardingIsFollowedAndRemembered) {
  auto client = Client(Options());
  ASSERT_TRUE(SetSync(*client, "moving", "value").ok());
  const int slot = RedisKeySlot(client->PrefixedKey("moving"));
  const int from = cluster_.MasterOfSlot(slot);
  std::vector<int> masters = cluster_.Masters();
  const int to = masters[0] == from ? masters[1] : masters[0];
  MoveSlot(slot, from, to, /*finish=*/true);
  ASSERT_EQ(cluster_.MasterOfSlot(slot, static_cast<size_t>(to)), to);

  auto v = GetSync(*client, "moving");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(*v, "value");
  EXPECT_GE(client->cluster_stats().moved, 1u);
  // The slot's new owner is in the map: the next call goes straight there.
  const auto owner = client->SlotOwner(slot);
  ASSERT_TRUE(owner.has_value());
  EXPECT_EQ(owner->port, cluster_.node(static_cast<size_t>(to)).port());
  const uint64_t moved = client->cluster_stats().moved;
  ASSERT_TRUE(SetSync(*client, "moving", "again").ok());
  EXPECT_EQ(*GetSync(*client, "moving"), "again");
  EXPECT_EQ(client->cluster_stats().moved, moved);
}

TEST_F(RedisClusterClientTest, StreamAppendAndReadRouteByKeyAndFollowTheStreamWhenItMoves) {
  MetricsRegistry metrics;
  auto client = Client(Options(), &metrics);
  using Entries = std::vector<RedisClient::StreamEntry>;
  auto append = [&](std::string value) {
    return Await<Result<std::string>>(
        [&](auto cb) { client->StreamAppend("log", std::move(value), 100, cb); });
  };
  auto read = [&](std::string after) {
    return Await<Result<Entries>>(
        [&](auto cb) { client->StreamRead("log", std::move(after), 100, cb); });
  };
  const std::string binary("a\0b", 3);
  std::vector<std::string> ids;
  for (const std::string& v : {std::string("one"), binary}) {
    auto id = append(v);
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    ids.push_back(*id);
  }
  // On the master of the key's slot, as a stream.
  const std::string key = client->PrefixedKey("log");
  const int slot = RedisKeySlot(key);
  const int from = cluster_.MasterOfSlot(slot);
  EXPECT_EQ(cluster_.node(static_cast<size_t>(from)).CommandText({"XLEN", key}), "2");
  auto all = read("");
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].id, ids[0]);
  EXPECT_EQ((*all)[1].value, binary);
  EXPECT_TRUE(read(ids[1])->empty());
  auto missing = Await<Result<Entries>>([&](auto cb) { client->StreamRead("nolog", "", 10, cb); });
  ASSERT_TRUE(missing.ok()) << missing.status().ToString();
  EXPECT_TRUE(missing->empty());
  auto bad = Await<Result<Entries>>([&](auto cb) { client->StreamRead("log", "x", 10, cb); });
  EXPECT_EQ(bad.status().code(), Status::Code::kInvalidArgument);

  // The slot moves: the stream goes with it, the calls follow MOVED there.
  std::vector<int> masters = cluster_.Masters();
  const int to = masters[0] == from ? masters[1] : masters[0];
  MoveSlot(slot, from, to, /*finish=*/true);
  auto after_move = read(ids[0]);
  ASSERT_TRUE(after_move.ok()) << after_move.status().ToString();
  ASSERT_EQ(after_move->size(), 1u);
  EXPECT_EQ(after_move->front().value, binary);
  EXPECT_GE(client->cluster_stats().moved, 1u);
  auto id = append("three");
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  auto tail = read(ids[1]);
  ASSERT_TRUE(tail.ok());
  ASSERT_EQ(tail->size(), 1u);
  EXPECT_EQ(tail->front().id, *id);
  EXPECT_EQ(cluster_.node(static_cast<size_t>(to)).CommandText({"XLEN", key}), "3");

  const std::string text = metrics.Serialize();
  EXPECT_NE(text.find("tailcut_redis_commands_total{command=\"xadd\",result=\"ok\"} 3"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("tailcut_redis_commands_total{command=\"xrange\",result=\"ok\"} 5"),
            std::string::npos)
      << text;
}

TEST_F(RedisClusterClientTest, AskDuringMigrationReachesTheImportingNode) {
  auto client = Client(Options());
  // One slot (hash tag), two keys: one migrated to the importing node, one not yet.
  ASSERT_TRUE(SetSync(*client, "{mig}.stays", "old-home").ok());
  const int slot = RedisKeySlot(client->PrefixedKey("{mig}.stays"));
  const int from = cluster_.MasterOfSlot(slot);
  std::vector<int> masters = cluster_.Masters();
  const int to = masters[0] == from ? masters[1] : masters[0];
  ASSERT_TRUE(SetSync(*client, "{mig}.goes", "new-home").ok());
  MoveSlot(slot, from, to, /*finish=*/false);  // Both keys now on `to`, the slot still `from`'s.
  ASSERT_TRUE(client->SlotOwner(slot).has_value());

  auto v = GetSync(*client, "{mig}.goes");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(*v, "new-home");
  EXPECT_GE(client->cluster_stats().ask, 1u);
  // ASK does not change the map: the slot is still the migrating node's.
  EXPECT_EQ(client->SlotOwner(slot)->port, cluster_.node(static_cast<size_t>(from)).port());
  // A write to the slot mid-migration: the source asks us over, and it lands there too.
  ASSERT_TRUE(SetSync(*client, "{mig}.new", "written").ok());
  const std::string s = std::to_string(slot);
  EXPECT_EQ(cluster_.node(static_cast<size_t>(to)).CommandText({"CLUSTER", "COUNTKEYSINSLOT", s}),
            "3");
  EXPECT_EQ(cluster_.node(static_cast<size_t>(from)).CommandText({"CLUSTER", "COUNTKEYSINSLOT", s}),
            "0");
  auto both = MultiGetSync(*client, {"{mig}.goes", "{mig}.stays", "{mig}.new"});
  ASSERT_TRUE(both.ok()) << both.status().ToString();
  EXPECT_EQ(*both, (Values{"new-home", "old-home", "written"}));
}

TEST_F(RedisClusterClientTest, DeleteByPatternRemovesKeysOnEveryMaster) {
  auto client = Client(Options());
  for (int i = 0; i < 300; ++i) {
    ASSERT_TRUE(SetSync(*client, "emb:m:" + std::to_string(i), "x").ok());
  }
  ASSERT_TRUE(SetSync(*client, "emb:other:1", "kept").ok());
  for (int m : cluster_.Masters()) {
    EXPECT_GT(std::stoll(cluster_.node(static_cast<size_t>(m)).CommandText({"DBSIZE"})), 50);
  }
  auto deleted = DeleteSync(*client, "emb:m:*");
  ASSERT_TRUE(deleted.ok()) << deleted.status().ToString();
  EXPECT_EQ(*deleted, 300);
  int64_t left = 0;
  for (int m : cluster_.Masters()) {
    left += std::stoll(cluster_.node(static_cast<size_t>(m)).CommandText({"DBSIZE"}));
  }
  EXPECT_EQ(left, 1);
  EXPECT_EQ(*GetSync(*client, "emb:other:1"), "kept");
  EXPECT_EQ(*DeleteSync(*client, "emb:m:*"), 0);
}

TEST_F(RedisClusterClientTest, AMasterKilledFailsOverWhileEveryCallIsAnsweredOnTime) {
  RedisOptions o = Options();
  o.command_timeout_millis = 100;
  o.cluster_refresh_min_interval_millis = 50;
  auto client = Client(o);
  std::vector<std::string> keys;
  for (int i = 0; i < 60; ++i) {
    keys.push_back("f" + std::to_string(i));
    ASSERT_TRUE(SetSync(*client, keys.back(), "v" + std::to_string(i)).ok());
  }
  const int slot = RedisKeySlot(client->PrefixedKey("f0"));
  const int victim = cluster_.MasterOfSlot(slot);
  const int replica = cluster_.ReplicaOf(victim, 0);
  ASSERT_GE(replica, 0);
  // Every write is on the replica before the kill (replication is asynchronous: a write the
  // replica had not applied would be lost with the master, and its key missed for good).
  std::string error;
  ASSERT_TRUE(cluster_.WaitReplicaCaughtUp(victim, replica, 10s, &error)) << error;
  cluster_.node(static_cast<size_t>(victim)).Kill();

  // Calls go on throughout the failover: each is answered within its deadline, and what it
  // answers is right (a value is the value written; failures are errors or misses, never
  // another key's value).
  std::atomic<int> late{0}, wrong{0}, answered{0}, issued{0};
  const auto give_up = std::chrono::steady_clock::now() + 20s;
  bool recovered = false;
  while (std::chrono::steady_clock::now() < give_up && !recovered) {
    const int64_t called = SystemClock::Get().NowMicros();
    issued += 1;
    auto r = MultiGetSync(*client, keys);
    answered += 1;
    if ((SystemClock::Get().NowMicros() - called) / 1000 >
        o.command_timeout_millis + kSlackMillis) {
      late += 1;
    }
    if (r.ok()) {
      bool all = true;
      for (size_t i = 0; i < keys.size(); ++i) {
        if ((*r)[i].has_value() && *(*r)[i] != "v" + keys[i].substr(1)) wrong += 1;
        all = all && (*r)[i].has_value();
      }
      recovered =
          all && client->SlotOwner(slot).has_value() &&
          client->SlotOwner(slot)->port == cluster_.node(static_cast<size_t>(replica)).port();
    }
    std::this_thread::sleep_for(10ms);  // Pacing of the load, not ordering.
  }
  EXPECT_TRUE(recovered) << "the promoted replica never served the killed master's keys";
  EXPECT_EQ(late.load(), 0);
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(answered.load(), issued.load());
  EXPECT_GE(client->cluster_stats().refreshes, 2u);
  // Writes go to the new master too.
  ASSERT_TRUE(SetSync(*client, "f0", "after").ok());
  EXPECT_EQ(cluster_.node(static_cast<size_t>(replica)).CommandText({"GET", "test:f0"}), "after");
}

TEST_F(RedisClusterClientTest, DestroyedWithCallsInFlightAnswersEachOnce) {
  std::atomic<int> calls{0};
  {
    auto client = Client(Options());
    for (int i = 0; i < 500; ++i) {
      client->MultiGet({"a" + std::to_string(i), "b" + std::to_string(i), "c"},
                       [&calls](Result<Values>) { calls.fetch_add(1); });
    }
  }
  EXPECT_EQ(calls.load(), 500);
}

}  // namespace
}  // namespace tailcut
