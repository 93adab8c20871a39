#include "server/tei_api.h"

#include "server/json_body.h"
#include "server/variant_json.h"

namespace tailcut {
namespace {

constexpr std::string_view kEmbedRoute = "/embed";
constexpr std::string_view kRootRoute = "/";

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
  req.received_micros = exchange->received_micros();
  ApiContext::ApplyCacheControl(*exchange, &req);
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
