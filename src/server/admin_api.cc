#include "server/admin_api.h"

#include <nlohmann/json.hpp>

#include "server/json_body.h"

namespace tailcut {
namespace {

std::string_view BreakerName(CircuitBreaker::State s) {
  switch (s) {
    case CircuitBreaker::State::kClosed:
      return "closed";
    case CircuitBreaker::State::kOpen:
      return "open";
    case CircuitBreaker::State::kHalfOpen:
      return "half_open";
  }
  return "unknown";
}

HttpResponse Json(const nlohmann::json& j) {
  HttpResponse res;
  res.body = j.dump();
  return res;
}

}  // namespace

void AddAdminRoutes(Router& router, ApiContext& ctx, InferenceService& service) {
  router.Add("GET", "/admin/cache", [&ctx, &service](const HttpExchangePtr& ex) {
    nlohmann::json j = {{"enabled", service.cache() != nullptr}};
    if (EmbeddingCache* cache = service.cache()) {
      if (L1Cache* l1 = cache->l1()) {
        const auto s = l1->stats();
        j["l1"] = {{"hits", s.hits},           {"misses", s.misses},
                   {"inserts", s.inserts},     {"rejected_by_admission", s.rejected_by_admission},
                   {"evictions", s.evictions}, {"expirations", s.expirations},
                   {"flushed", s.flushed},     {"bytes", s.bytes},
                   {"entries", s.entries},     {"capacity_bytes", l1->options().capacity_bytes}};
      }
      if (RedisClient* l2 = cache->l2()) {
        const auto s = l2->stats();
        j["l2"] = {{"breaker", BreakerName(l2->breaker_state())},
                   {"round_trips", s.round_trips},
                   {"commands_sent", s.commands_sent},
                   {"connects", s.connects}};
      }
    }
    ctx.Finish(ex, "/admin/cache", "", Json(j), {});
  });

  router.Add("GET", "/admin/semantic-cache", [&ctx, &service](const HttpExchangePtr& ex) {
    nlohmann::json j = {{"enabled", service.semantic_cache() != nullptr}};
    if (SemanticOutputCache* cache = service.semantic_cache()) {
      const auto s = cache->stats();
      const auto& o = cache->options();
      j["policy"] = o.policy;
      if (o.policy == "verifier") j["verifier_threshold"] = cache->verifier_threshold();
      if (o.policy == "reranker") {
        j["reranker_model"] = o.reranker_model;
        j["reranker_threshold"] = cache->verifier_threshold();
      }
      if (o.policy != "exact") {
        j["embedding_model"] = o.embedding_model;
        j["embedding_variant"] = o.embedding_variant;
      }
      j["exact_hits"] = s.exact_hits;
      j["semantic_hits"] = s.semantic_hits;
      j["misses"] = s.misses;
      j["bypasses"] = s.bypasses;
      j["inserts"] = s.inserts;
      j["adopted_from_replicas"] = s.adopted;
      j["single_flight_joins"] = s.single_flight_joins;
      j["entries"] = s.store.entries;
      j["bytes"] = s.store.bytes;
      j["capacity_bytes"] = o.store.capacity_bytes;
      j["partitions"] = s.store.partitions;
      j["evicted"] = s.store.evicted;
      j["expired"] = s.store.expired;
      j["shared_through_redis"] = service.semantic_sync() != nullptr;
      if (SemanticCacheSync* sync = service.semantic_sync()) {
        const auto r = sync->stats();
        j["redis"] = {{"published", r.published}, {"publish_failures", r.publish_failures},
                      {"read", r.read},           {"adopted", r.adopted},
                      {"skipped", r.skipped},     {"read_failures", r.read_failures}};
      }
    }
    ctx.Finish(ex, "/admin/semantic-cache", "", Json(j), {});
  });

  router.Add("DELETE", "/admin/semantic-cache", [&ctx, &service](const HttpExchangePtr& ex) {
    SemanticOutputCache* cache = service.semantic_cache();
    if (!cache) {
      return ctx.FinishError(ex, "/admin/semantic-cache", "",
                             Status::NotFound("the semantic cache is off (semantic.enabled)"),
                             ErrorStyle::kOpenAi);
    }
    const int64_t removed = cache->Flush();
    SemanticCacheSync* sync = service.semantic_sync();
    if (!sync) {
      return ctx.Finish(ex, "/admin/semantic-cache", "", Json({{"removed", removed}}), {});
    }
    // The shared log too, so that no replica adopts the flushed answers again (the other
    // replicas' in-process entries stay until flushed there or expired).
    sync->DeleteLog([&ctx, ex, removed](Result<int64_t> deleted) {
      nlohmann::json j = {{"removed", removed}, {"redis_log_deleted", deleted.ok()}};
      if (!deleted.ok()) j["redis_error"] = deleted.status().message();
      ctx.Finish(ex, "/admin/semantic-cache", "", Json(j), {});
    });
  });

  router.Add("DELETE", "/admin/cache/{model}", [&ctx, &service](const HttpExchangePtr& ex) {
    const std::string model = ex->params["model"];
    service.FlushCache(model, [&ctx, ex, model](Result<int64_t> removed) {
      if (!removed.ok()) {
        return ctx.FinishError(ex, "/admin/cache/{model}", "", removed.status(),
                               ErrorStyle::kOpenAi);
      }
      ctx.Finish(ex, "/admin/cache/{model}", "", Json({{"model", model}, {"removed", *removed}}),
                 {});
    });
  });

  router.Add("PUT", "/admin/models/{name}/precision", [&ctx, &service](const HttpExchangePtr& ex) {
    const std::string name = ex->params["name"];
    auto body = ParseJsonObject(ex->TakeBody());
    if (!body.ok()) {
      return ctx.FinishError(ex, "/admin/models/{name}/precision", "", body.status(),
                             ErrorStyle::kOpenAi);
    }
    auto variant = ReadOptionalString(*body, "variant");
    if (!variant.ok() || !body->contains("variant")) {
      return ctx.FinishError(
          ex, "/admin/models/{name}/precision", "",
          Status::InvalidArgument("field 'variant' is required: a variant name, a precision "
                                  "(fp32, fp16, int8), or null to let the controller choose"),
          ErrorStyle::kOpenAi);
    }
    Status s = service.SetActiveVariant(name, variant->value_or(""));
    if (!s.ok()) {
      return ctx.FinishError(ex, "/admin/models/{name}/precision", "", s, ErrorStyle::kOpenAi);
    }
    auto d = service.DescribeModel(name);
    ctx.Finish(ex, "/admin/models/{name}/precision", "",
               Json({{"model", d->name},
                     {"active_variant", d->active_variant},
                     {"policy", d->precision_policy}}),
               {});
  });

  router.Add("POST", "/admin/models/{name}/reload", [&ctx, &service](const HttpExchangePtr& ex) {
    const std::string name = ex->params["name"];
    service.ReloadModel(name, [&ctx, &service, ex, name](const Status& s) {
      if (!s.ok()) {
        return ctx.FinishError(ex, "/admin/models/{name}/reload", "", s, ErrorStyle::kOpenAi);
      }
      auto d = service.DescribeModel(name);
      ctx.Finish(ex, "/admin/models/{name}/reload", "",
                 Json({{"model", d->name}, {"version", d->version}, {"state", "READY"}}), {});
    });
  });
}

}  // namespace tailcut
