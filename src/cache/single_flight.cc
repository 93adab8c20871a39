#include "cache/single_flight.h"

namespace tailcut {

SingleFlight::SingleFlight(size_t shards)
    : shard_count_(shards == 0 ? 1 : shards), shards_(new Shard[shard_count_]) {}

SingleFlight::Shard& SingleFlight::ShardFor(const CacheKey& key) const {
  return shards_[CacheKeyHash{}(key) % shard_count_];
}

bool SingleFlight::JoinOrLead(const CacheKey& key, Waiter waiter) {
  Shard& shard = ShardFor(key);
  std::lock_guard<std::mutex> lock(shard.mutex);
  auto [it, inserted] = shard.flights.try_emplace(key);
  if (inserted) return true;
  it->second.push_back(std::move(waiter));
  return false;
}

void SingleFlight::Complete(const CacheKey& key, const Status& status,
                            std::span<const float> row) {
  std::vector<Waiter> waiters;
  {
    Shard& shard = ShardFor(key);
    std::lock_guard<std::mutex> lock(shard.mutex);
    auto it = shard.flights.find(key);
    if (it == shard.flights.end()) return;
    waiters = std::move(it->second);
    shard.flights.erase(it);
  }
  for (auto& w : waiters) w(status, row);
}

size_t SingleFlight::in_flight() const {
  size_t n = 0;
  for (size_t i = 0; i < shard_count_; ++i) {
    std::lock_guard<std::mutex> lock(shards_[i].mutex);
    n += shards_[i].flights.size();
  }
  return n;
}

}  // namespace tailcut
