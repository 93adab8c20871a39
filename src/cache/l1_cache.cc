#include "cache/l1_cache.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <mutex>
#include <new>
#include <unordered_map>
#include <utility>

#include "cache/frequency_sketch.h"

namespace tailcut {
namespace {

enum Segment : uint8_t { kWindow = 0, kProbation = 1, kProtected = 2, kSegmentCount = 3 };

// Why an entry left the cache; each maps to one Stats counter and one metric label.
enum class Removal { kCapacity, kRejected, kExpired, kFlush };

constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
// Most expired entries one Insert drops from the write-order head. Keeps a single insert's
// work bounded after a long idle period; the rest go on later inserts or lookups.
constexpr int kMaxExpiredPerInsert = 16;
// Caffeine's ADMIT_HASHDOS_THRESHOLD: a candidate at least this warm that loses a duel is
// still admitted with probability 1/128, so an attacker cannot pin a victim by making it
// artificially hot (and a warm newcomer eventually gets a chance against a hot victim).
constexpr int kAdmitWarmCandidate = 6;

// Production keys are xxh3 digests, but tests and synthetic traces use small sequential
// values, so the shard index and sketch positions come from a proper mix (murmur3's
// finaliser) of both halves rather than from raw key bits.
uint64_t MixKey(const CacheKey& k) {
  uint64_t h = k.low + 0x9E3779B97F4A7C15ull * (k.high ^ (k.high >> 31));
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return h;
}

struct Entry;
struct Links {
  Entry* prev = nullptr;
  Entry* next = nullptr;
};

// One allocation: this header followed by `floats` floats. Trivially destructible, so it
// is released with plain operator delete.
struct Entry {
  Links access;  // Recency order within its segment, least recent first.
  Links write;   // Write order within the shard; with one TTL this is expiry order.
  CacheKey key;
  int64_t expires_at_micros = kNever;
  uint32_t tag = 0;
  uint32_t floats = 0;
  Segment segment = kWindow;

  float* data() { return reinterpret_cast<float*>(this + 1); }
};
static_assert(alignof(Entry) >= alignof(float));

// glibc malloc: a chunk is the request plus an 8-byte header, rounded up to 16 bytes, at
// least 32. (tcmalloc/jemalloc size classes round differently, by a few percent.)
constexpr size_t MallocChunk(size_t request) {
  return std::max<size_t>(32, (request + 8 + 15) & ~size_t{15});
}
// A libstdc++ unordered_map node: next pointer, the key/value pair, and the cached hash code
// (libstdc++ caches it because CacheKeyHash is not noexcept; 40 or 32 bytes, the same chunk).
constexpr size_t kMapNodeBytes =
    MallocChunk(sizeof(void*) + sizeof(std::pair<const CacheKey, Entry*>) + sizeof(size_t));
// Bucket array share: one pointer per bucket, 1-2 buckets per element (load factor <= 1,
// doubling growth).
constexpr size_t kBucketBytes = 2 * sizeof(void*);

// Intrusive doubly-linked list over one of Entry's Links members; O(1) everything.
// Front = least recently used / oldest write.
template <Links Entry::*L>
class List {
 public:
  Entry* front() const { return head_; }
  static Entry* Next(const Entry* e) { return (e->*L).next; }

  void PushBack(Entry* e) {
    (e->*L).prev = tail_;
    (e->*L).next = nullptr;
    if (tail_ != nullptr) {
      (tail_->*L).next = e;
    } else {
      head_ = e;
    }
    tail_ = e;
  }
  void Remove(Entry* e) {
    Links& l = e->*L;
    if (l.prev != nullptr) {
      (l.prev->*L).next = l.next;
    } else {
      head_ = l.next;
    }
    if (l.next != nullptr) {
      (l.next->*L).prev = l.prev;
    } else {
      tail_ = l.prev;
    }
    l.prev = l.next = nullptr;
  }
  void MoveToBack(Entry* e) {
    if (tail_ == e) return;
    Remove(e);
    PushBack(e);
  }
  // `fresh` takes `old`'s place (same neighbours).
  void Replace(Entry* old, Entry* fresh) {
    Links& l = old->*L;
    fresh->*L = l;
    if (l.prev != nullptr) {
      (l.prev->*L).next = fresh;
    } else {
      head_ = fresh;
    }
    if (l.next != nullptr) {
      (l.next->*L).prev = fresh;
    } else {
      tail_ = fresh;
    }
    l.prev = l.next = nullptr;
  }
  void Reset() { head_ = tail_ = nullptr; }

 private:
  Entry* head_ = nullptr;
  Entry* tail_ = nullptr;
};

Entry* NewEntry(const CacheKey& key, uint32_t tag, std::span<const float> value,
                int64_t expires_at_micros) {
  void* memory = ::operator new(sizeof(Entry) + value.size_bytes());
  Entry* e = new (memory) Entry;
  e->key = key;
  e->tag = tag;
  e->floats = static_cast<uint32_t>(value.size());
  e->expires_at_micros = expires_at_micros;
  if (!value.empty()) std::memcpy(e->data(), value.data(), value.size_bytes());
  return e;
}

// Frees a chain of removed entries linked through access.next. Called after the shard lock
// is released so deallocation never lengthens a critical section.
void FreeChain(Entry* e) {
  while (e != nullptr) {
    Entry* next = e->access.next;
    ::operator delete(static_cast<void*>(e));
    e = next;
  }
}

size_t Charge(const Entry* e) {
  return L1Cache::ChargeBytes(e->floats);
}

}  // namespace

// One lock stripe: a complete W-TinyLFU (or SLRU) cache over its share of the key space.
// Every method requires `mu` held. Removed entries are pushed on a caller-owned chain (the
// "graveyard") and freed after unlocking.
struct alignas(64) L1Cache::Shard {
  mutable std::mutex mu;
  std::unordered_map<CacheKey, Entry*, CacheKeyHash> map;
  List<&Entry::access> lists[kSegmentCount];
  List<&Entry::write> write_order;
  size_t segment_bytes[kSegmentCount] = {};
  size_t bytes = 0;

  size_t capacity = 0;
  size_t window_max = 0;
  size_t protected_max = 0;
  bool admission = true;
  std::unique_ptr<FrequencySketch> sketch;  // Only with admission.
  uint64_t rng = 0;                         // xorshift state for the warm-candidate lottery.

  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t inserts = 0;
  uint64_t rejected = 0;
  uint64_t evictions = 0;
  uint64_t expirations = 0;
  uint64_t flushed = 0;

  void Init(const L1CacheOptions& o, size_t shard_capacity, size_t index) {
    capacity = shard_capacity;
    admission = o.admission_filter;
    const double window_fraction = std::clamp(o.window_fraction, 0.0, 1.0);
    window_max =
        admission ? static_cast<size_t>(static_cast<double>(capacity) * window_fraction) : 0;
    // Caffeine's split: 80% of the main space protected, the rest probation.
    protected_max = static_cast<size_t>(static_cast<double>(capacity - window_max) * 0.8);
    const size_t expected =
        std::max<size_t>(1, capacity / L1Cache::ChargeBytes(o.expected_value_floats));
    // Reserving up front keeps rehashing (O(n) under the lock) off the steady-state path.
    map.reserve(expected);
    if (admission) sketch = std::make_unique<FrequencySketch>(expected);
    rng = 0x9E3779B97F4A7C15ull * (index + 1);
  }

  void Link(Entry* e, Segment segment) {
    e->segment = segment;
    lists[segment].PushBack(e);
    const size_t c = Charge(e);
    segment_bytes[segment] += c;
    bytes += c;
  }

  void MoveTo(Entry* e, Segment segment) {
    const size_t c = Charge(e);
    lists[e->segment].Remove(e);
    segment_bytes[e->segment] -= c;
    e->segment = segment;
    lists[segment].PushBack(e);
    segment_bytes[segment] += c;
  }

  void Remove(Entry* e, Removal why, Entry** graveyard) {
    const size_t c = Charge(e);
    lists[e->segment].Remove(e);
    write_order.Remove(e);
    segment_bytes[e->segment] -= c;
    bytes -= c;
    map.erase(e->key);
    switch (why) {
      case Removal::kCapacity:
        ++evictions;
        break;
      case Removal::kRejected:
        ++rejected;
        break;
      case Removal::kExpired:
        ++expirations;
        break;
      case Removal::kFlush:
        ++flushed;
        break;
    }
    e->access.next = *graveyard;
    *graveyard = e;
  }

  // A hit (or overwrite): recency within the window or protected segment; a probation entry
  // has now been used twice while resident and is promoted to protected, demoting
  // protected's least recent entries to probation if that overflows it.
  void Touch(Entry* e) {
    switch (e->segment) {
      case kWindow:
      case kProtected:
        lists[e->segment].MoveToBack(e);
        break;
      case kProbation:
        MoveTo(e, kProtected);
        while (segment_bytes[kProtected] > protected_max) {
          MoveTo(lists[kProtected].front(), kProbation);
        }
        break;
      case kSegmentCount:
        break;
    }
  }

  void ExpireFromHead(int64_t now, Entry** graveyard) {
    for (int i = 0; i < kMaxExpiredPerInsert; ++i) {
      Entry* e = write_order.front();
      if (e == nullptr || e->expires_at_micros > now) return;
      Remove(e, Removal::kExpired, graveyard);
    }
  }

  // Stores `fresh` (a new allocation). Returns whether it is resident afterwards.
  bool Insert(Entry* fresh, uint64_t hash, int64_t now, Entry** graveyard) {
    ExpireFromHead(now, graveyard);
    if (admission) sketch->Increment(hash);  // A write is an access (as in Caffeine).
    auto [it, inserted] = map.try_emplace(fresh->key, fresh);
    if (inserted) {
      Link(fresh, admission ? kWindow : kProbation);
      write_order.PushBack(fresh);
    } else {
      // Overwrite: the new allocation takes the old one's place in every structure.
      Entry* old = it->second;
      it->second = fresh;
      const Segment segment = old->segment;
      fresh->segment = segment;
      lists[segment].Replace(old, fresh);
      write_order.Remove(old);
      write_order.PushBack(fresh);  // TTL restarts.
      segment_bytes[segment] = segment_bytes[segment] - Charge(old) + Charge(fresh);
      bytes = bytes - Charge(old) + Charge(fresh);
      old->access.next = *graveyard;
      *graveyard = old;
      Touch(fresh);
    }
    const bool resident = Evict(fresh, graveyard);
    if (resident) ++inserts;
    return resident;
  }

  // Restores the size bounds; returns false if `fresh` itself was dropped.
  bool Evict(Entry* fresh, Entry** graveyard) {
    bool fresh_dropped = false;
    auto drop = [&](Entry* e, Removal why) {
      if (e == fresh) fresh_dropped = true;
      Remove(e, why, graveyard);
    };
    if (!admission) {
      // Segmented LRU: probation's least recent first, protected only once probation is empty.
      while (bytes > capacity) {
        Entry* victim = lists[kProbation].front();
        if (victim == nullptr) victim = lists[kProtected].front();
        drop(victim, Removal::kCapacity);
      }
      return !fresh_dropped;
    }
    Entry* candidate = EvictFromWindow();
    EvictFromMain(candidate, drop);
    return !fresh_dropped;
  }

  // Moves the window's least recent entries to probation's tail until the window fits;
  // returns the first (oldest) of them, the first admission candidate. The candidates are
  // contiguous at probation's tail, in order.
  Entry* EvictFromWindow() {
    Entry* first = nullptr;
    while (segment_bytes[kWindow] > window_max) {
      Entry* e = lists[kWindow].front();
      MoveTo(e, kProbation);
      if (first == nullptr) first = e;
    }
    return first;
  }

  // Caffeine's evictFromMain: while over capacity, the next candidate (walking from the
  // oldest new arrival toward the newest) duels probation's least recent entry (the victim);
  // the less frequent one is evicted. Candidates that win stay in probation. If probation
  // runs out of victims, protected and then the window supply them; if candidates run out,
  // the window's entries become candidates.
  template <typename Drop>
  void EvictFromMain(Entry* candidate, Drop& drop) {
    Segment victim_queue = kProbation;
    bool candidates_from_window = false;
    Entry* victim = lists[kProbation].front();
    while (bytes > capacity) {
      if (candidate == nullptr && !candidates_from_window) {
        candidate = lists[kWindow].front();
        candidates_from_window = true;
      }
      if (candidate == nullptr && victim == nullptr) {
        if (victim_queue == kProbation) {
          victim = lists[kProtected].front();
          victim_queue = kProtected;
          continue;
        }
        if (victim_queue == kProtected) {
          victim = lists[kWindow].front();
          victim_queue = kWindow;
          continue;
        }
        break;  // Empty; unreachable while bytes > capacity.
      }
      if (victim == nullptr) {
        Entry* next = Next(candidate);
        drop(candidate, Removal::kRejected);
        candidate = next;
        continue;
      }
      if (candidate == nullptr) {
        Entry* next = Next(victim);
        drop(victim, Removal::kCapacity);
        victim = next;
        continue;
      }
      if (candidate == victim) {  // Probation holds nothing older than the candidates.
        victim = Next(victim);
        drop(candidate, Removal::kRejected);
        candidate = nullptr;
        continue;
      }
      if (Admit(candidate, victim)) {
        Entry* next = Next(victim);
        drop(victim, Removal::kCapacity);
        victim = next;
        candidate = Next(candidate);
      } else {
        Entry* next = Next(candidate);
        drop(candidate, Removal::kRejected);
        candidate = next;
      }
    }
  }

  Entry* Next(const Entry* e) const { return List<&Entry::access>::Next(e); }

  bool Admit(const Entry* candidate, const Entry* victim) {
    const int candidate_freq = sketch->Frequency(MixKey(candidate->key));
    const int victim_freq = sketch->Frequency(MixKey(victim->key));
    if (candidate_freq > victim_freq) return true;
    if (candidate_freq < kAdmitWarmCandidate) return false;
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (rng & 127) == 0;
  }

  size_t RemoveIf(uint32_t tag, bool all, Entry** graveyard) {
    size_t removed = 0;
    for (auto& list : lists) {
      for (Entry* e = list.front(); e != nullptr;) {
        Entry* next = Next(e);
        if (all || e->tag == tag) {
          Remove(e, Removal::kFlush, graveyard);
          ++removed;
        }
        e = next;
      }
    }
    return removed;
  }
};

struct L1Cache::MetricsHook {
  std::mutex mu;
  const L1Cache* cache = nullptr;  // Null once the cache is destroyed.
  Counter* hits = nullptr;
  Counter* misses = nullptr;
  Counter* evicted_capacity = nullptr;
  Counter* evicted_expired = nullptr;
  Counter* evicted_flush = nullptr;
  Counter* rejected = nullptr;
  Gauge* bytes = nullptr;
  Gauge* entries = nullptr;
  Stats published;  // What the counters already include.

  // Requires `mu`. Counters only ever grow, so publishing the difference is exact.
  void Publish(const Stats& s) {
    hits->Inc(static_cast<double>(s.hits - published.hits));
    misses->Inc(static_cast<double>(s.misses - published.misses));
    evicted_capacity->Inc(static_cast<double>(s.evictions - published.evictions));
    evicted_expired->Inc(static_cast<double>(s.expirations - published.expirations));
    evicted_flush->Inc(static_cast<double>(s.flushed - published.flushed));
    rejected->Inc(static_cast<double>(s.rejected_by_admission - published.rejected_by_admission));
    bytes->Set(static_cast<double>(s.bytes));
    entries->Set(static_cast<double>(s.entries));
    published = s;
  }
};

size_t L1Cache::ChargeBytes(size_t floats) {
  return MallocChunk(sizeof(Entry) + floats * sizeof(float)) + kMapNodeBytes + kBucketBytes;
}

L1Cache::L1Cache(const L1CacheOptions& options, const Clock& clock, MetricsRegistry* metrics)
    : options_(options),
      clock_(clock),
      shard_count_(static_cast<size_t>(std::max(1, options.shards))),
      shards_(new Shard[shard_count_]) {
  for (size_t i = 0; i < shard_count_; ++i) {
    shards_[i].Init(options_, options_.capacity_bytes / shard_count_, i);
  }
  if (metrics == nullptr) return;
  auto& lookups = metrics->AddCounter("tailcut_cache_lookups_total",
                                      "Embedding cache lookups by tier and result (hit|miss)",
                                      {"tier", "result"});
  auto& evictions = metrics->AddCounter(
      "tailcut_cache_evictions_total",
      "Embedding cache entries removed, by reason: capacity (evicted to make room), expired "
      "(TTL), flush (model unloaded or cache cleared)",
      {"tier", "reason"});
  auto& rejected = metrics->AddCounter(
      "tailcut_cache_admission_rejected_total",
      "Values the cache's admission policy declined to keep (less popular than what they "
      "would have displaced, or too large)",
      {"tier"});
  auto& bytes =
      metrics->AddGauge("tailcut_cache_bytes",
                        "Bytes charged to resident cache entries (payload + overhead)", {"tier"});
  auto& entries = metrics->AddGauge("tailcut_cache_entries", "Resident cache entries", {"tier"});
  metrics_hook_ = std::make_shared<MetricsHook>();
  metrics_hook_->cache = this;
  metrics_hook_->hits = &lookups.WithLabels({"l1", "hit"});
  metrics_hook_->misses = &lookups.WithLabels({"l1", "miss"});
  metrics_hook_->evicted_capacity = &evictions.WithLabels({"l1", "capacity"});
  metrics_hook_->evicted_expired = &evictions.WithLabels({"l1", "expired"});
  metrics_hook_->evicted_flush = &evictions.WithLabels({"l1", "flush"});
  metrics_hook_->rejected = &rejected.WithLabels({"l1"});
  metrics_hook_->bytes = &bytes.WithLabels({"l1"});
  metrics_hook_->entries = &entries.WithLabels({"l1"});
  // The registry cannot remove hooks, so the hook holds the shared state, not the cache, and
  // does nothing once the cache is gone.
  metrics->AddCollectHook([hook = metrics_hook_] {
    std::lock_guard<std::mutex> lock(hook->mu);
    if (hook->cache != nullptr) hook->Publish(hook->cache->stats());
  });
}

L1Cache::~L1Cache() {
  if (metrics_hook_ != nullptr) {
    std::lock_guard<std::mutex> lock(metrics_hook_->mu);
    Stats final_stats = stats();
    final_stats.bytes = 0;  // The memory goes with the cache.
    final_stats.entries = 0;
    metrics_hook_->Publish(final_stats);
    metrics_hook_->cache = nullptr;
  }
  for (size_t i = 0; i < shard_count_; ++i) {
    Entry* graveyard = nullptr;
    shards_[i].RemoveIf(0, /*all=*/true, &graveyard);
    FreeChain(graveyard);
  }
}

L1Cache::Shard& L1Cache::ShardFor(uint64_t hash) const {
  // Multiply-shift maps the high 32 bits onto [0, shards) without a division; the sketch
  // uses the low bits, so shard choice and sketch position stay independent.
  return shards_[static_cast<size_t>(((hash >> 32) * shard_count_) >> 32)];
}

bool L1Cache::Lookup(const CacheKey& key, std::vector<float>* out) {
  return Find(key, out, /*count_miss=*/true);
}

bool L1Cache::LookupAgain(const CacheKey& key, std::vector<float>* out) {
  return Find(key, out, /*count_miss=*/false);
}

bool L1Cache::Find(const CacheKey& key, std::vector<float>* out, bool count_miss) {
  const uint64_t hash = MixKey(key);
  Shard& s = ShardFor(hash);
  const int64_t now = Now();
  Entry* graveyard = nullptr;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.map.find(key);
    if (it == s.map.end()) {
      if (count_miss) ++s.misses;
      return false;
    }
    Entry* e = it->second;
    if (e->expires_at_micros > now) {
      if (out != nullptr) out->assign(e->data(), e->data() + e->floats);
      s.Touch(e);
      if (s.admission) s.sketch->Increment(hash);
      ++s.hits;
      return true;
    }
    s.Remove(e, Removal::kExpired, &graveyard);
    if (count_miss) ++s.misses;
  }
  FreeChain(graveyard);
  return false;
}

bool L1Cache::Insert(const CacheKey& key, uint32_t tag, std::span<const float> value) {
  const uint64_t hash = MixKey(key);
  Shard& s = ShardFor(hash);
  if (ChargeBytes(value.size()) > s.capacity) {
    std::lock_guard<std::mutex> lock(s.mu);
    ++s.rejected;
    return false;
  }
  const int64_t now = Now();
  const int64_t ttl = options_.ttl_micros;
  const int64_t expires = ttl > 0 && now < kNever - ttl ? now + ttl : kNever;
  // Allocation and the payload copy happen before locking.
  Entry* fresh = NewEntry(key, tag, value, expires);
  Entry* graveyard = nullptr;
  bool resident = false;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    resident = s.Insert(fresh, hash, now, &graveyard);
  }
  FreeChain(graveyard);
  return resident;
}

bool L1Cache::Contains(const CacheKey& key) const {
  Shard& s = ShardFor(MixKey(key));
  const int64_t now = Now();
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.map.find(key);
  return it != s.map.end() && it->second->expires_at_micros > now;
}

std::optional<int64_t> L1Cache::RemainingTtlMicros(const CacheKey& key) const {
  Shard& s = ShardFor(MixKey(key));
  const int64_t now = Now();
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.map.find(key);
  if (it == s.map.end() || it->second->expires_at_micros <= now) return std::nullopt;
  if (it->second->expires_at_micros == kNever) return kNever;
  return it->second->expires_at_micros - now;
}

size_t L1Cache::EraseTag(uint32_t tag) {
  size_t removed = 0;
  for (size_t i = 0; i < shard_count_; ++i) {
    Entry* graveyard = nullptr;
    {
      std::lock_guard<std::mutex> lock(shards_[i].mu);
      removed += shards_[i].RemoveIf(tag, /*all=*/false, &graveyard);
    }
    FreeChain(graveyard);
  }
  return removed;
}

void L1Cache::Clear() {
  for (size_t i = 0; i < shard_count_; ++i) {
    Entry* graveyard = nullptr;
    {
      std::lock_guard<std::mutex> lock(shards_[i].mu);
      shards_[i].RemoveIf(0, /*all=*/true, &graveyard);
    }
    FreeChain(graveyard);
  }
}

L1Cache::Stats L1Cache::stats() const {
  Stats total;
  for (size_t i = 0; i < shard_count_; ++i) {
    const Shard& s = shards_[i];
    std::lock_guard<std::mutex> lock(s.mu);
    total.hits += s.hits;
    total.misses += s.misses;
    total.inserts += s.inserts;
    total.rejected_by_admission += s.rejected;
    total.evictions += s.evictions;
    total.expirations += s.expirations;
    total.flushed += s.flushed;
    total.bytes += s.bytes;
    total.entries += s.map.size();
  }
  return total;
}

}  // namespace tailcut
