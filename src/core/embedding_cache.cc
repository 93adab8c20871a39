#include "core/embedding_cache.h"

#include <spdlog/spdlog.h>

#include <cstdio>

#include "cache/cached_value.h"

namespace tailcut {

struct EmbeddingCache::Metrics {
  explicit Metrics(MetricsRegistry& r)
      : l2(r.AddCounter("tailcut_l2_lookups_total",
                        "Redis (L2) lookups of embeddings by result (error includes an open "
                        "circuit; corrupt = a value that failed decoding)",
                        {"result"})),
        l2_stores(r.AddCounter("tailcut_l2_stores_total", "Embeddings written to Redis (L2)")
                      .Get()),
        flights(r.AddCounter(
            "tailcut_single_flight_total",
            "Misses by single-flight outcome: leader (computes), joined (shared an in-process "
            "computation), remote_hit (shared another replica's), remote_timeout and "
            "lock_error (computed after all), fallback (their leader failed: the first of them "
            "leads a new computation, the others wait for it)",
            {"outcome"})),
        l2_hit(&l2.WithLabels({"hit"})),
        l2_miss(&l2.WithLabels({"miss"})),
        l2_error(&l2.WithLabels({"error"})),
        l2_corrupt(&l2.WithLabels({"corrupt"})),
        leader(&flights.WithLabels({"leader"})),
        joined(&flights.WithLabels({"joined"})),
        remote_hit(&flights.WithLabels({"remote_hit"})),
        remote_timeout(&flights.WithLabels({"remote_timeout"})),
        lock_error(&flights.WithLabels({"lock_error"})),
        fallback(&flights.WithLabels({"fallback"})) {}

  Family<Counter>& l2;
  Counter& l2_stores;
  Family<Counter>& flights;
  Counter *l2_hit, *l2_miss, *l2_error, *l2_corrupt;
  Counter *leader, *joined, *remote_hit, *remote_timeout, *lock_error, *fallback;
};

struct EmbeddingCache::Pending {
  Request request;
  int64_t start_micros = 0;
};

namespace {

// Escapes Redis glob characters so a model name matches only itself in SCAN MATCH.
std::string EscapeGlob(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

EmbeddingCache::EmbeddingCache(const EmbeddingCacheOptions& options, L1Cache* l1, RedisClient* l2,
                               const Clock& clock, MetricsRegistry* metrics)
    : options_(options),
      l1_(l1),
      l2_(l2),
      clock_(clock),
      delayed_(clock),
      rng_(std::random_device{}()) {
  static MetricsRegistry unused_registry;
  metrics_ = std::make_unique<Metrics>(metrics ? *metrics : unused_registry);
}

EmbeddingCache::~EmbeddingCache() = default;

uint32_t EmbeddingCache::TagFor(const std::string& model) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (size_t i = 0; i < tags_.size(); ++i) {
    if (tags_[i] == model) return static_cast<uint32_t>(i + 1);
  }
  tags_.push_back(model);
  return static_cast<uint32_t>(tags_.size());
}

std::string EmbeddingCache::NewToken() {
  std::lock_guard<std::mutex> lock(mutex_);
  char buf[33];
  std::snprintf(buf, sizeof(buf), "%016llx%016llx", static_cast<unsigned long long>(rng_()),
                static_cast<unsigned long long>(rng_()));
  return buf;
}

std::string EmbeddingCache::L2Key(const std::string& model, const CacheKey& key) const {
  return "emb:" + model + ":" + key.ToHex();
}

std::string EmbeddingCache::LockKey(const std::string& model, const CacheKey& key) const {
  return "lock:" + model + ":" + key.ToHex();
}

void EmbeddingCache::Resolve(Request request, std::vector<Item> items) {
  auto p = std::make_shared<Pending>();
  p->request = std::move(request);
  p->start_micros = clock_.NowMicros();
  const auto& job = p->request.job;

  std::vector<Item> misses;
  if (p->request.read && l1_) {
    thread_local std::vector<float> row;
    const size_t dims = static_cast<size_t>(job->dimensions());
    for (auto& item : items) {
      if (item.read_first && l1_->Lookup(*item.read_first, &row) && row.size() == dims) {
        job->CompleteFromCache(item.index, row, /*reference=*/true);
      } else if (l1_->Lookup(item.key, &row) && row.size() == dims) {
        job->CompleteFromCache(item.index, row);
      } else {
        misses.push_back(std::move(item));
      }
    }
  } else {
    misses = std::move(items);
  }
  if (misses.empty()) {
    job->AddCacheMicros(clock_.NowMicros() - p->start_micros);
    return;
  }
  ArmDeadline(*p);
  if (p->request.read && l2_) return LookupL2(std::move(p), std::move(misses));
  SingleFlightAndSchedule(std::move(p), std::move(misses));
}

void EmbeddingCache::ArmDeadline(const Pending& p) {
  const int64_t deadline = p.request.deadline_micros;
  if (deadline <= 0) return;
  // Weak: a request answered long before its deadline is not kept alive by its timer. The
  // waits themselves are left to end on their own (a leader's computation still serves its
  // other waiters and the cache; a poll for another replica sees the job finished and stops).
  std::weak_ptr<EmbedJob> weak = p.request.job;
  delayed_.RunAfter(std::max<int64_t>(0, deadline - clock_.NowMicros()), [weak](bool cancelled) {
    if (cancelled) return;  // Shutting down: the waits are answered as they end.
    if (auto job = weak.lock(); job && !job->finished()) {
      job->Fail(Status::DeadlineExceeded(
          "the request's deadline passed before its embeddings were ready (waiting for the "
          "cache, another computation of the same input, or the model)"));
    }
  });
}

void EmbeddingCache::LookupL2(std::shared_ptr<Pending> p, std::vector<Item> misses) {
  // One MGET: each item's own key, then the read_first keys of the items that have one.
  std::vector<std::string> keys;
  keys.reserve(misses.size());
  for (const auto& m : misses) keys.push_back(L2Key(p->request.model, m.key));
  std::vector<size_t> first_slot(misses.size(), 0);  // 0 = no read_first key.
  for (size_t i = 0; i < misses.size(); ++i) {
    if (!misses[i].read_first) continue;
    first_slot[i] = keys.size();
    keys.push_back(L2Key(p->request.model, *misses[i].read_first));
  }
  auto shared = std::make_shared<std::vector<Item>>(std::move(misses));
  const int64_t asked_micros = clock_.NowMicros();
  const auto key_count = static_cast<int64_t>(keys.size());
  l2_->MultiGet(std::move(keys), [this, p, shared, first_slot = std::move(first_slot),
                                  asked_micros, key_count](
                                     Result<std::vector<std::optional<std::string>>> r) {
    StageTimings::RedisLookup lookup;
    lookup.micros = clock_.NowMicros() - asked_micros;
    lookup.keys = key_count;
    lookup.failed = !r.ok();
    if (r.ok()) {
      for (const auto& v : *r) lookup.hits += v.has_value() ? 1 : 0;
    }
    p->request.job->AddRedisLookup(lookup);
    // Before any row completes: the last row answers the request, and what is added to the
    // job after that is not in its answer (an all-hit lookup would show no cache stage).
    p->request.job->AddCacheMicros(clock_.NowMicros() - p->start_micros);
    std::vector<Item> still;
    if (!r.ok()) {
      metrics_->l2_error->Inc(static_cast<double>(shared->size()));
      still = std::move(*shared);
    } else {
      const auto& values = *r;
      const size_t dims = static_cast<size_t>(p->request.job->dimensions());
      // The row stored at values[slot], or nothing (absent or damaged: a damaged value is a
      // miss, and the recomputed row overwrites it).
      auto decode = [&](size_t slot, bool* corrupt) -> std::optional<std::vector<float>> {
        if (slot >= values.size() || !values[slot]) return std::nullopt;
        auto row = DecodeEmbedding(*values[slot], dims);
        if (!row.ok()) {
          metrics_->l2_corrupt->Inc();
          *corrupt = true;
          return std::nullopt;
        }
        return std::move(row).value();
      };
      for (size_t i = 0; i < shared->size(); ++i) {
        Item& item = (*shared)[i];
        if (first_slot[i] != 0) {
          bool ignored = false;
          if (auto row = decode(first_slot[i], &ignored)) {
            metrics_->l2_hit->Inc();
            if (l1_ && p->request.write) l1_->Insert(*item.read_first, p->request.tag, *row);
            p->request.job->CompleteFromCache(item.index, *row, /*reference=*/true);
            continue;
          }
        }
        bool corrupt = false;
        auto row = decode(i, &corrupt);
        if (!row) {
          if (!corrupt) metrics_->l2_miss->Inc();
          still.push_back(std::move(item));
          continue;
        }
        metrics_->l2_hit->Inc();
        if (l1_ && p->request.write) l1_->Insert(item.key, p->request.tag, *row);
        p->request.job->CompleteFromCache(item.index, *row);
      }
    }
    SingleFlightAndSchedule(p, std::move(still));
  });
}

void EmbeddingCache::SingleFlightAndSchedule(std::shared_ptr<Pending> p,
                                             std::vector<Item> misses) {
  p->request.job->AddCacheMicros(clock_.NowMicros() - p->start_micros);
  if (misses.empty()) return;
  const bool write = p->request.write;
  auto ticket = [&](const Item& item, bool leader) {
    CacheTicket t;
    t.key = item.key;
    t.tag = p->request.tag;
    t.model = p->request.model;
    t.write = write;
    t.leader = leader;
    return t;
  };
  // A request that asked for a fresh result (no-cache) neither joins others nor leads.
  if (!options_.single_flight || !p->request.read) {
    std::vector<std::pair<Item, std::optional<CacheTicket>>> direct;
    for (auto& item : misses) {
      auto t = ticket(item, false);
      direct.emplace_back(std::move(item), std::move(t));
    }
    return Schedule(p, std::move(direct));
  }

  std::vector<Item> leaders;
  const size_t dims = static_cast<size_t>(p->request.job->dimensions());
  for (auto& item : misses) {
    if (flights_.JoinOrLead(item.key, MakeWaiter(p, item))) {
      // A second look at L1 now that this request leads: between its first look (or its L2
      // miss) and here, an earlier leader may have stored the row and ended its flight, and
      // this one would compute it again. A leader stores in L1 before it ends its flight, so
      // a row stored by then is seen here.
      thread_local std::vector<float> row;
      if (l1_ && l1_->LookupAgain(item.key, &row) && row.size() == dims) {
        p->request.job->CompleteFromCache(item.index, row);
        flights_.Complete(item.key, Status::Ok(), row);
        continue;
      }
      metrics_->leader->Inc();
      leaders.push_back(std::move(item));
    } else {
      metrics_->joined->Inc();
    }
  }
  if (leaders.empty()) return;
  if (l2_ && options_.distributed_single_flight) return LockOrWait(p, std::move(leaders));
  std::vector<std::pair<Item, std::optional<CacheTicket>>> scheduled;
  for (auto& item : leaders) {
    auto t = ticket(item, true);
    scheduled.emplace_back(std::move(item), std::move(t));
  }
  Schedule(p, std::move(scheduled));
}

CacheTicket EmbeddingCache::TicketFor(const Pending& p, const Item& item, bool leader) {
  CacheTicket t;
  t.key = item.key;
  t.tag = p.request.tag;
  t.model = p.request.model;
  t.write = p.request.write;
  t.leader = leader;
  return t;
}

SingleFlight::Waiter EmbeddingCache::MakeWaiter(std::shared_ptr<Pending> p, Item item) {
  return [this, p = std::move(p), item = std::move(item)](const Status& status,
                                                          std::span<const float> row) mutable {
    if (status.ok()) {
      p->request.job->CompleteItem(item.index, row);
      return;
    }
    metrics_->fallback->Inc();
    if (p->request.job->finished()) return;  // This request failed already: nothing to do.
    std::vector<std::pair<Item, std::optional<CacheTicket>>> one;
    const Status::Code code = status.code();
    if (code != Status::Code::kDeadlineExceeded && code != Status::Code::kFailedPrecondition &&
        code != Status::Code::kCancelled) {
      // Not the leading request's own end (shutting down, queue full, a model error): each
      // waiter tries alone, as it would have without single-flight.
      CacheTicket t = TicketFor(*p, item, /*leader=*/false);
      one.emplace_back(std::move(item), std::move(t));
      return Schedule(p, std::move(one));
    }
    // The leading request ended on its own (its deadline passed, its client went away; see
    // also WaitForRemote).
    // Each waiter still deserves its try, but not its own computation of the same row (a herd
    // of identical rows exactly when the server is overloaded): the first waiter to get here
    // leads a new flight and the others join it. (Complete() has ended the failed flight
    // before calling its waiters.)
    if (!flights_.JoinOrLead(item.key, MakeWaiter(p, item))) return;
    CacheTicket t = TicketFor(*p, item, /*leader=*/true);
    one.emplace_back(std::move(item), std::move(t));
    Schedule(p, std::move(one));
  };
}

bool EmbeddingCache::TakeRemoteValue(const std::shared_ptr<Pending>& p, const Item& item,
                                     const std::string& bytes) {
  auto row = DecodeEmbedding(bytes, static_cast<size_t>(p->request.job->dimensions()));
  if (!row.ok()) return false;
  metrics_->remote_hit->Inc();
  if (l1_ && p->request.write) l1_->Insert(item.key, p->request.tag, *row);
  p->request.job->CompleteFromCache(item.index, *row);
  flights_.Complete(item.key, Status::Ok(), *row);
  return true;
}

void EmbeddingCache::LockOrWait(std::shared_ptr<Pending> p, std::vector<Item> leaders) {
  // The lock and a second look at L2 go out together (one pipeline, the GET after the SET NX):
  // between this request's MGET and its lock another replica may have stored the row and
  // released its lock, and taking the lock alone would compute the row again. The replies are
  // joined here in whatever order the callbacks run (a rejected call calls back at once).
  struct Probe {
    std::mutex mutex;
    int pending = 2;
    Result<bool> locked = Status::Internal("no reply");
    Result<std::optional<std::string>> value = Status::Internal("no reply");
  };
  for (auto& item : leaders) {
    std::string token = NewToken();
    auto shared_item = std::make_shared<Item>(std::move(item));
    auto probe = std::make_shared<Probe>();
    auto decide = [this, p, shared_item, token, probe] {
      const Result<bool>& locked = probe->locked;
      const bool held = locked.ok() && *locked;
      if (probe->value.ok() && probe->value->has_value() &&
          TakeRemoteValue(p, *shared_item, **probe->value)) {
        if (held) l2_->Unlock(LockKey(p->request.model, shared_item->key), token, nullptr);
        return;
      }
      if (locked.ok() && !held) {
        // Another replica is computing it: wait for its value.
        WaitForRemote(p, std::move(*shared_item),
                      clock_.NowMicros() + options_.remote_wait_millis * 1000);
        return;
      }
      CacheTicket t = TicketFor(*p, *shared_item, /*leader=*/true);
      if (held) {
        t.remote_lock = true;
        t.lock_token = token;
      } else {
        metrics_->lock_error->Inc();
      }
      std::vector<std::pair<Item, std::optional<CacheTicket>>> one;
      one.emplace_back(std::move(*shared_item), std::move(t));
      Schedule(p, std::move(one));
    };
    auto arrive = [probe, decide](auto store) {
      bool last;
      {
        std::lock_guard<std::mutex> lock(probe->mutex);
        store();
        last = --probe->pending == 0;
      }
      if (last) decide();
    };
    l2_->TryLock(LockKey(p->request.model, shared_item->key), token, options_.lock_ttl_millis,
                 [probe, arrive](Result<bool> r) {
                   arrive([&] { probe->locked = std::move(r); });
                 });
    l2_->Get(L2Key(p->request.model, shared_item->key),
             [probe, arrive](Result<std::optional<std::string>> r) {
               arrive([&] { probe->value = std::move(r); });
             });
  }
}

void EmbeddingCache::WaitForRemote(std::shared_ptr<Pending> p, Item item, int64_t give_up_micros) {
  auto shared_item = std::make_shared<Item>(std::move(item));
  delayed_.RunAfter(options_.remote_poll_millis * 1000, [this, p, shared_item,
                                                         give_up_micros](bool cancelled) {
    auto compute_here = [this, p, shared_item] {
      CacheTicket t;
      t.key = shared_item->key;
      t.tag = p->request.tag;
      t.model = p->request.model;
      t.write = p->request.write;
      t.leader = true;
      std::vector<std::pair<Item, std::optional<CacheTicket>>> one;
      one.emplace_back(std::move(*shared_item), std::move(t));
      Schedule(p, std::move(one));
    };
    if (cancelled || p->request.job->finished()) {
      // Shutting down, or the request already failed: release local waiters (on a failed
      // request, not a shutdown, one of them takes over; see MakeWaiter).
      const Status s =
          cancelled ? Status::Unavailable("shutting down while waiting for another replica")
                    : Status::FailedPrecondition(
                          "the leading request ended while waiting for another replica");
      flights_.Complete(shared_item->key, s, {});
      p->request.job->Fail(s);
      return;
    }
    l2_->Get(L2Key(p->request.model, shared_item->key),
             [this, p, shared_item, give_up_micros,
              compute_here](Result<std::optional<std::string>> r) {
               if (r.ok() && r->has_value() && TakeRemoteValue(p, *shared_item, **r)) return;
               if (!r.ok() || clock_.NowMicros() >= give_up_micros) {
                 metrics_->remote_timeout->Inc();
                 return compute_here();
               }
               WaitForRemote(p, std::move(*shared_item), give_up_micros);
             });
  });
}

void EmbeddingCache::Schedule(const std::shared_ptr<Pending>& p,
                              std::vector<std::pair<Item, std::optional<CacheTicket>>> items) {
  std::vector<CacheTicket> tickets;
  for (const auto& [item, t] : items) {
    if (t) tickets.push_back(*t);
  }
  Status s = p->request.schedule(std::move(items));
  if (s.ok()) return;
  for (const auto& t : tickets) OnComputeFailed(t, s);
  p->request.job->Fail(s);
}

void EmbeddingCache::OnComputed(const CacheTicket& ticket, std::span<const float> row) {
  if (ticket.write) {
    if (l1_) l1_->Insert(ticket.key, ticket.tag, row);
    if (l2_) {
      metrics_->l2_stores.Inc();
      l2_->Set(L2Key(ticket.model, ticket.key), EncodeEmbedding(row), 0, nullptr);
    }
  }
  // After the SET on the same connection: a replica that sees the lock gone finds the value.
  if (ticket.remote_lock && l2_) {
    l2_->Unlock(LockKey(ticket.model, ticket.key), ticket.lock_token, nullptr);
  }
  if (ticket.leader) flights_.Complete(ticket.key, Status::Ok(), row);
}

void EmbeddingCache::OnComputeFailed(const CacheTicket& ticket, const Status& status) {
  if (ticket.remote_lock && l2_) {
    l2_->Unlock(LockKey(ticket.model, ticket.key), ticket.lock_token, nullptr);
  }
  if (ticket.leader) flights_.Complete(ticket.key, status, {});
}

void EmbeddingCache::Prefetch(const std::string& model, uint32_t tag, size_t dims,
                              std::vector<CacheKey> keys,
                              std::function<void(std::vector<CacheKey>)> done) {
  if (!l2_ || keys.empty()) return done(std::move(keys));
  std::vector<std::string> names;
  names.reserve(keys.size());
  for (const auto& k : keys) names.push_back(L2Key(model, k));
  auto shared = std::make_shared<std::vector<CacheKey>>(std::move(keys));
  l2_->MultiGet(std::move(names), [this, shared, tag, dims, done = std::move(done)](
                                      Result<std::vector<std::optional<std::string>>> r) {
    if (!r.ok()) return done(std::move(*shared));
    std::vector<CacheKey> missing;
    for (size_t i = 0; i < shared->size(); ++i) {
      std::optional<Result<std::vector<float>>> row;
      if (i < r->size() && (*r)[i]) row = DecodeEmbedding(*(*r)[i], dims);
      if (row && row->ok() && l1_) {
        l1_->Insert((*shared)[i], tag, **row);
      } else {
        missing.push_back((*shared)[i]);
      }
    }
    done(std::move(missing));
  });
}

void EmbeddingCache::PersistHotSet(const std::string& model, const std::vector<CacheKey>& keys) {
  if (!l2_) return;
  std::string value;
  value.reserve(keys.size() * 32);
  for (const auto& k : keys) value += k.ToHex();
  // A day: long enough for restarts and deploys, short enough to fade if unused.
  l2_->Set("hot:" + model, std::move(value), 24 * 3600, nullptr);
}

void EmbeddingCache::LoadHotSet(const std::string& model, uint32_t tag, size_t dims,
                                std::function<void(size_t)> done) {
  if (!l2_ || !l1_) return done(0);
  l2_->Get("hot:" + model, [this, model, tag, dims, done = std::move(done)](
                               Result<std::optional<std::string>> r) {
    if (!r.ok() || !r->has_value()) return done(0);
    const std::string& hex = **r;
    std::vector<CacheKey> keys;
    for (size_t i = 0; i + 32 <= hex.size(); i += 32) {
      auto k = CacheKey::FromHex(std::string_view(hex).substr(i, 32));
      if (!k) return done(0);  // Not ours or damaged: warm-up is an optimisation, skip it.
      keys.push_back(*k);
    }
    const size_t wanted = keys.size();
    Prefetch(model, tag, dims, std::move(keys), [wanted, done](std::vector<CacheKey> missing) {
      done(wanted - missing.size());
    });
  });
}

void EmbeddingCache::Flush(uint32_t tag, const std::string& model,
                           std::function<void(Result<int64_t>)> done) {
  const int64_t local = l1_ ? static_cast<int64_t>(l1_->EraseTag(tag)) : 0;
  if (!l2_) return done(local);
  l2_->DeleteByPattern("emb:" + EscapeGlob(model) + ":*",
                       [local, done = std::move(done)](Result<int64_t> r) {
                         if (!r.ok()) return done(r.status());
                         done(local + *r);
                       });
}

}  // namespace tailcut
