#include "core/semantic_cache_sync.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

namespace tailcut {

namespace {
constexpr int kEntryFormat = 1;

int64_t UnixMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}
}  // namespace

std::string EncodeSemanticEntry(const SemanticEntry& e, const Clock& clock) {
  nlohmann::json pieces = nlohmann::json::array();
  for (const auto& p : e.pieces) pieces.push_back({p.text, p.tokens});
  const nlohmann::json j = {
      {"v", kEntryFormat},
      {"id", e.id},
      {"partition", e.partition},
      {"query", e.query},
      {"embedding", e.embedding},
      {"model", e.model},
      {"variant", e.variant},
      {"pieces", std::move(pieces)},
      {"finish_reason", e.finish_reason},
      {"prompt_tokens", e.prompt_tokens},
      {"completion_tokens", e.completion_tokens},
      {"created_unix_micros", UnixMicros() - (clock.NowMicros() - e.created_micros)}};
  // Invalid UTF-8 in a prompt or a piece (a token split mid-character) is replaced, not fatal.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::optional<SemanticEntry> DecodeSemanticEntry(std::string_view value, const Clock& clock) {
  const auto j = nlohmann::json::parse(value, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || j.value("v", 0) != kEntryFormat) return std::nullopt;
  try {
    SemanticEntry e;
    e.id = j.at("id").get<std::string>();
    e.partition = j.at("partition").get<std::string>();
    e.query = j.at("query").get<std::string>();
    e.embedding = j.at("embedding").get<std::vector<float>>();
    e.model = j.at("model").get<std::string>();
    e.variant = j.at("variant").get<std::string>();
    for (const auto& p : j.at("pieces")) {
      e.pieces.push_back({p.at(0).get<std::string>(), p.at(1).get<int32_t>()});
    }
    e.finish_reason = j.at("finish_reason").get<std::string>();
    e.prompt_tokens = j.at("prompt_tokens").get<int32_t>();
    e.completion_tokens = j.at("completion_tokens").get<int32_t>();
    e.created_micros =
        clock.NowMicros() - (UnixMicros() - j.at("created_unix_micros").get<int64_t>());
    // An empty embedding is an exact-policy replica's entry: found by its text only.
    if (e.id.empty()) return std::nullopt;
    for (float x : e.embedding) {
      if (!std::isfinite(x)) return std::nullopt;
    }
    return e;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

SemanticCacheSync::SemanticCacheSync(const SemanticCacheSyncOptions& options, RedisClient& redis,
                                     SemanticOutputCache& cache, SemanticOutputCache::PostFn post,
                                     int64_t ttl_micros, const Clock& clock)
    : options_(options),
      redis_(redis),
      cache_(cache),
      post_(std::move(post)),
      ttl_micros_(ttl_micros),
      clock_(clock),
      timer_(std::make_unique<DelayedExecutor>(clock)) {}

SemanticCacheSync::~SemanticCacheSync() {
  Stop();
}

void SemanticCacheSync::Start() {
  Schedule(0);
}

void SemanticCacheSync::Stop() {
  std::unique_ptr<DelayedExecutor> timer;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopped_ = true;
    timer = std::move(timer_);
  }
  timer.reset();  // Joins its thread; a pending poll runs cancelled (does nothing).
}

void SemanticCacheSync::Schedule(int64_t delay_micros) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopped_ || !timer_) return;
  timer_->RunAfter(delay_micros, [this](bool cancelled) {
    if (!cancelled) Poll();
  });
}

void SemanticCacheSync::Poll() {
  std::string after;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopped_) return;
    after = last_id_;
  }
  redis_.StreamRead(
      options_.stream_key, after, options_.read_batch,
      [this](Result<std::vector<RedisClient::StreamEntry>> entries) {
        if (stopped_) return;
        const int64_t poll_micros = options_.poll_millis * 1000;
        if (!entries.ok()) {
          read_failures_.fetch_add(1, std::memory_order_relaxed);
          return Schedule(poll_micros);
        }
        const bool more = static_cast<int64_t>(entries->size()) >= options_.read_batch;
        if (!entries->empty()) {
          {
            std::lock_guard<std::mutex> lock(mutex_);
            last_id_ = entries->back().id;
          }
          read_.fetch_add(static_cast<int64_t>(entries->size()), std::memory_order_relaxed);
          auto batch =
              std::make_shared<std::vector<RedisClient::StreamEntry>>(std::move(entries).value());
          auto adopt = [this, batch] {
            const int64_t now = clock_.NowMicros();
            for (const auto& item : *batch) {
              auto entry = DecodeSemanticEntry(item.value, clock_);
              if (!entry || (ttl_micros_ > 0 && now - entry->created_micros >= ttl_micros_)) {
                skipped_.fetch_add(1, std::memory_order_relaxed);
                continue;
              }
              if (cache_.Adopt(std::move(*entry))) {
                adopted_.fetch_add(1, std::memory_order_relaxed);
              }
            }
          };
          if (post_) {
            post_(std::move(adopt));
          } else {
            adopt();
          }
        }
        Schedule(more ? 0 : poll_micros);
      });
}

void SemanticCacheSync::Publish(const SemanticEntry& entry) {
  if (stopped_) return;
  published_.fetch_add(1, std::memory_order_relaxed);
  redis_.StreamAppend(options_.stream_key, EncodeSemanticEntry(entry, clock_),
                      options_.max_log_entries, [this](Result<std::string> id) {
                        if (!id.ok()) publish_failures_.fetch_add(1, std::memory_order_relaxed);
                      });
}

void SemanticCacheSync::DeleteLog(std::function<void(Result<int64_t>)> done) {
  redis_.DeleteByPattern(options_.stream_key, std::move(done));
}

SemanticCacheSyncStats SemanticCacheSync::stats() const {
  SemanticCacheSyncStats s;
  s.published = published_.load(std::memory_order_relaxed);
  s.publish_failures = publish_failures_.load(std::memory_order_relaxed);
  s.read = read_.load(std::memory_order_relaxed);
  s.adopted = adopted_.load(std::memory_order_relaxed);
  s.skipped = skipped_.load(std::memory_order_relaxed);
  s.read_failures = read_failures_.load(std::memory_order_relaxed);
  return s;
}

}  // namespace tailcut
