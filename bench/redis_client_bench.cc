// Benchmarks of RedisClient (src/cache/redis_client.h) against a private loopback
// redis-server (tests/cache/redis_server_fixture.h; $TAILCUT_REDIS_SERVER or redis-server on
// PATH), values of 384 floats (1552 bytes encoded, as the L2 tier stores them):
//   BM_MultiGetSequential  one MGET of 8 embeddings at a time, call -> callback: the latency
//                          one request's L2 lookup sees; p50_us / p99_us over the run.
//   BM_MultiGetPipelined   single-key MGETs from one thread with up to 2000 in flight: the
//                          client's throughput (items_per_second) and how many calls share
//                          one round trip (calls_per_round_trip).
// Not run by ctest: numbers, not pass/fail, and they depend on the machine.
//
//   build/bench/redis_client_bench --benchmark_repetitions=3
//       --benchmark_report_aggregates_only=true      (one command line)
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cache/cached_value.h"
#include "cache/redis_client.h"
#include "tests/cache/redis_server_fixture.h"

namespace {

using tailcut::RedisClient;
using tailcut::RedisOptions;
using tailcut::SystemClock;
using Values = std::vector<std::optional<std::string>>;

int g_port = 0;  // The private server's, set by main().

// A client with 8 embeddings stored under emb:0..7.
struct Loaded {
  std::unique_ptr<RedisClient> client;
  std::vector<std::string> keys;

  Loaded() {
    RedisOptions o;
    o.port = g_port;
    o.key_prefix = "bench";
    o.command_timeout_millis = 2000;  // Measures speed, not timeouts.
    client = std::make_unique<tailcut::RedisClientImpl>(o, SystemClock::Get(), nullptr);
    const std::string value = tailcut::EncodeEmbedding(std::vector<float>(384, 0.125f));
    for (int i = 0; i < 8; ++i) {
      keys.push_back("emb:" + std::to_string(i));
      std::promise<tailcut::Status> stored;
      client->Set(keys.back(), value, 0, [&](tailcut::Status s) { stored.set_value(s); });
      if (!stored.get_future().get().ok()) std::fprintf(stderr, "SET failed\n");
    }
  }
};

void BM_MultiGetSequential(benchmark::State& state) {
  Loaded l;
  std::vector<int64_t> us;
  int64_t errors = 0;
  for (auto _ : state) {
    const int64_t start = SystemClock::Get().NowMicros();
    std::promise<bool> done;
    l.client->MultiGet(l.keys, [&](tailcut::Result<Values> r) { done.set_value(r.ok()); });
    if (!done.get_future().get()) ++errors;
    us.push_back(SystemClock::Get().NowMicros() - start);
  }
  std::sort(us.begin(), us.end());
  if (!us.empty()) {
    state.counters["p50_us"] = static_cast<double>(us[us.size() / 2]);
    state.counters["p99_us"] = static_cast<double>(us[us.size() * 99 / 100]);
  }
  state.counters["errors"] = static_cast<double>(errors);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_MultiGetSequential)->Iterations(2000)->UseRealTime();

void BM_MultiGetPipelined(benchmark::State& state) {
  constexpr int kInFlight = 2000;
  Loaded l;
  std::atomic<int64_t> in_flight{0};
  std::atomic<int64_t> errors{0};
  const auto before = l.client->stats();
  int64_t i = 0;
  for (auto _ : state) {
    while (in_flight.load() >= kInFlight) std::this_thread::yield();
    in_flight.fetch_add(1);
    l.client->MultiGet({l.keys[static_cast<size_t>(i++ % 8)]}, [&](tailcut::Result<Values> r) {
      if (!r.ok()) errors.fetch_add(1);
      in_flight.fetch_sub(1);
    });
  }
  // The timing includes draining what is still in flight.
  while (in_flight.load() > 0) std::this_thread::yield();
  const auto after = l.client->stats();
  const double trips = static_cast<double>(after.round_trips - before.round_trips);
  state.counters["calls_per_round_trip"] = trips > 0 ? static_cast<double>(i) / trips : 0;
  state.counters["errors"] = static_cast<double>(errors.load());
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_MultiGetPipelined)->Iterations(100'000)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  // Started from the main thread: the server's death signal is tied to the starting thread.
  tailcut::testing::RedisServer server;
  std::string error;
  if (!server.Start(&error)) {
    std::fprintf(stderr, "redis_client_bench: cannot start redis-server: %s\n", error.c_str());
    return 1;
  }
  g_port = server.port();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
