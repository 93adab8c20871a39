#include "server/tei_api.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "server/json_body.h"
#include "server/variant_json.h"

namespace tailcut {
namespace {

constexpr std::string_view kEmbedRoute = "/embed";
constexpr std::string_view kRootRoute = "/";
constexpr std::string_view kRerankRoute = "/rerank";

Result<EmbedRequest> ParseEmbed(HttpExchange& exchange) {
  auto body = ParseJsonObject(exchange.TakeBody());  // Not held while the request waits.
  if (!body.ok()) return body.status();
  const nlohmann::json& j = *body;
  EmbedRequest req;
  auto inputs = ReadStringOrStringArray(j, "inputs");
  if (!inputs.ok()) return inputs.status();
  req.inputs = std::move(inputs).value();
  auto normalize = ReadOptionalBool(j, "normalize");
  if (!normalize.ok()) return normalize.status();
  req.normalize = normalize->value_or(true);
  auto truncate = ReadOptionalBool(j, "truncate");
  if (!truncate.ok()) return truncate.status();
  req.truncate = truncate->value_or(false);
  auto direction = ReadOptionalString(j, "truncation_direction");
  if (!direction.ok()) return direction.status();
  if (direction->has_value() && **direction != "Right" && **direction != "right") {
    return Status::InvalidArgument("field 'truncation_direction' supports only 'Right'");
  }
  auto model = ReadOptionalString(j, "model");  // Extension: TEI serves one model.
  if (!model.ok()) return model.status();
  req.model = model->value_or("default");
  auto precision = ReadOptionalString(j, "precision");
  if (!precision.ok()) return precision.status();
  req.precision = precision->value_or("");
  return req;
}

// TEI's /embed, and its root route, which answers as /embed for an embedding model (what
// huggingface_hub's InferenceClient(model=<server URL>).feature_extraction() posts to).
void HandleEmbed(ApiContext& ctx, const HttpExchangePtr& exchange, std::string_view route) {
  const int64_t parse_start = ctx.clock().NowMicros();
  auto parsed = ParseEmbed(*exchange);
  if (!parsed.ok()) {
    return ctx.FinishError(exchange, route, "", parsed.status(), ErrorStyle::kTei);
  }
  EmbedRequest req = std::move(parsed).value();
  req.timings.parse_micros = ctx.clock().NowMicros() - parse_start;
  auto deadline = ctx.DeadlineFromHeaders(*exchange);
  if (!deadline.ok()) {
    return ctx.FinishError(exchange, route, req.model, deadline.status(), ErrorStyle::kTei);
  }
  req.deadline_micros = *deadline;
  const std::string model = req.model;
  ctx.Embed(*exchange, std::move(req), [&ctx, exchange, model, route](Result<EmbedResult> result) {
    if (!result.ok()) {
      return ctx.FinishError(exchange, route, model, result.status(), ErrorStyle::kTei);
    }
    const int64_t start = ctx.clock().NowMicros();
    HttpResponse res;
    std::string& out = res.body;
    const size_t n = result->token_counts.size();
    out.reserve(2 + n * (result->dimensions * 11 + 2));
    out += '[';
    for (size_t i = 0; i < n; ++i) {
      if (i) out += ',';
      AppendFloatArray(std::span<const float>(result->embeddings.data() + i * result->dimensions,
                                              result->dimensions),
                       &out);
    }
    out += ']';
    StageTimings t = result->timings;
    t.serialize_micros = ctx.clock().NowMicros() - start;
    AddVariantHeaders(*result, &res);
    ctx.Finish(exchange, route, result->model, std::move(res), t);
  });
}

struct RerankRequest {
  EmbedRequest embed;  // inputs: the query, once per text; second_inputs: the texts.
  bool raw_scores = false;
  bool return_text = false;
};

Result<RerankRequest> ParseRerank(HttpExchange& exchange) {
  auto body = ParseJsonObject(exchange.TakeBody());
  if (!body.ok()) return body.status();
  const nlohmann::json& j = *body;
  RerankRequest r;
  auto query = ReadOptionalString(j, "query");
  if (!query.ok()) return query.status();
  if (!query->has_value()) return Status::InvalidArgument("field 'query' is required");
  auto texts = ReadStringOrStringArray(j, "texts");
  if (!texts.ok()) return texts.status();
  r.embed.second_inputs = std::move(texts).value();
  r.embed.inputs.assign(r.embed.second_inputs.size(), **query);
  for (auto [field, out] :
       {std::pair{"raw_scores", &r.raw_scores}, std::pair{"return_text", &r.return_text},
        std::pair{"truncate", &r.embed.truncate}}) {
    auto value = ReadOptionalBool(j, field);
    if (!value.ok()) return value.status();
    *out = value->value_or(false);  // TEI's defaults: all three off.
  }
  auto direction = ReadOptionalString(j, "truncation_direction");
  if (!direction.ok()) return direction.status();
  if (direction->has_value() && **direction != "Right" && **direction != "right") {
    return Status::InvalidArgument("field 'truncation_direction' supports only 'Right'");
  }
  auto model = ReadOptionalString(j, "model");  // Extension: the repository's first reranker.
  if (!model.ok()) return model.status();
  r.embed.model = model->value_or("default");
  auto precision = ReadOptionalString(j, "precision");
  if (!precision.ok()) return precision.status();
  r.embed.precision = precision->value_or("");
  return r;
}

// TEI's /rerank: the query scored against each text by a reranker (a cross-encoder), answered
// as [{"index", "score"[, "text"]}] from the highest score down. The score is the sigmoid of
// the model's logit, or the logit itself with raw_scores.
void HandleRerank(ApiContext& ctx, const HttpExchangePtr& exchange) {
  const int64_t parse_start = ctx.clock().NowMicros();
  auto parsed = ParseRerank(*exchange);
  if (!parsed.ok()) {
    return ctx.FinishError(exchange, kRerankRoute, "", parsed.status(), ErrorStyle::kTei);
  }
  RerankRequest& r = *parsed;
  EmbedRequest& req = r.embed;
  req.timings.parse_micros = ctx.clock().NowMicros() - parse_start;
  auto deadline = ctx.DeadlineFromHeaders(*exchange);
  if (!deadline.ok()) {
    return ctx.FinishError(exchange, kRerankRoute, req.model, deadline.status(), ErrorStyle::kTei);
  }
  req.deadline_micros = *deadline;
  const std::string model = req.model;
  const bool raw_scores = r.raw_scores;
  // Kept for the answer only when it echoes them.
  auto texts = std::make_shared<std::vector<std::string>>();
  if (r.return_text) *texts = req.second_inputs;
  ctx.Embed(
      *exchange, std::move(req),
      [&ctx, exchange, model, raw_scores, texts](Result<EmbedResult> result) {
        if (!result.ok()) {
          return ctx.FinishError(exchange, kRerankRoute, model, result.status(), ErrorStyle::kTei);
        }
        const int64_t start = ctx.clock().NowMicros();
        const size_t n = result->token_counts.size();
        const int dim = std::max(result->dimensions, 1);
        if (result->embeddings.size() != n * static_cast<size_t>(dim)) {
          return ctx.FinishError(exchange, kRerankRoute, model,
                                 Status::Internal("the reranker answered " +
                                                  std::to_string(result->embeddings.size()) +
                                                  " values for " + std::to_string(n) + " pairs"),
                                 ErrorStyle::kTei);
        }
        std::vector<size_t> order(n);
        std::iota(order.begin(), order.end(), size_t{0});
        auto score = [&](size_t i) { return result->embeddings[i * static_cast<size_t>(dim)]; };
        // Highest first; equal scores keep the texts' order.
        std::stable_sort(order.begin(), order.end(),
                         [&](size_t a, size_t b) { return score(a) > score(b); });
        nlohmann::json out = nlohmann::json::array();
        for (size_t i : order) {
          const double logit = score(i);
          nlohmann::json e = {{"index", i},
                              {"score", raw_scores ? logit : 1.0 / (1.0 + std::exp(-logit))}};
          if (!texts->empty()) e["text"] = (*texts)[i];
          out.push_back(std::move(e));
        }
        HttpResponse res;
        res.body = out.dump();
        StageTimings t = result->timings;
        t.serialize_micros = ctx.clock().NowMicros() - start;
        AddVariantHeaders(*result, &res);
        ctx.Finish(exchange, kRerankRoute, result->model, std::move(res), t);
      });
}

// TEI's model_dtype ("float32", "float16"): the precision of the default variant, whose
// vector space every unpinned answer is in (the precision object says what else may serve).
std::string ModelDtype(const ModelDescription& d) {
  for (const auto& v : d.variant_details) {
    if (v.name != d.default_variant) continue;
    if (v.precision == "fp16") return "float16";
    if (v.precision == "int8") return "int8";
  }
  return "float32";
}

}  // namespace

void AddTeiRoutes(Router& router, ApiContext& ctx, const TeiOptions& options) {
  router.Add("POST", std::string(kEmbedRoute),
             [&ctx](const HttpExchangePtr& ex) { HandleEmbed(ctx, ex, kEmbedRoute); });
  router.Add("POST", std::string(kRootRoute),
             [&ctx](const HttpExchangePtr& ex) { HandleEmbed(ctx, ex, kRootRoute); });
  router.Add("POST", std::string(kRerankRoute),
             [&ctx](const HttpExchangePtr& ex) { HandleRerank(ctx, ex); });
  router.Add("GET", "/info", [&ctx, options](const HttpExchangePtr& ex) {
    auto d = ctx.api().DescribeModel("default");
    if (!d.ok()) return ctx.FinishError(ex, "/info", "", d.status(), ErrorStyle::kTei);
    HttpResponse res;
    res.body = nlohmann::json{
        {"model_id", d->name},
        {"model_sha", d->version.empty() ? nlohmann::json(nullptr) : nlohmann::json(d->version)},
        {"model_dtype", ModelDtype(*d)},
        {"model_type", {{"embedding", {{"pooling", "mean"}}}}},
        {"max_concurrent_requests", options.max_concurrent_requests},
        {"max_input_length", d->max_sequence_length},
        {"max_batch_tokens", 0},
        {"max_client_batch_size", options.max_client_batch_size},
        {"tokenization_workers", 0},
        {"version", TAILCUT_VERSION},
        {"state", ModelStateName(d->state)},
        {"precision",
         PrecisionJson(
             *d)}}.dump();
    ctx.Finish(ex, "/info", d->name, std::move(res), {});
  });
  router.Add("GET", "/health", [&ctx](const HttpExchangePtr& ex) {
    HttpResponse res;
    if (!ctx.api().Ready()) {
      res = ErrorResponse(Status::Unavailable("not ready: models are loading or the server is "
                                              "shutting down"),
                          ErrorStyle::kTei);
    } else {
      res.body = "{\"status\":\"ok\"}";
    }
    ctx.Finish(ex, "/health", "", std::move(res), {});
  });
}

}  // namespace tailcut
