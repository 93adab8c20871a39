#include "server/openai_api.h"

#include "server/json_body.h"
#include "server/variant_json.h"

namespace tailcut {
namespace {

constexpr std::string_view kEmbeddingsRoute = "/v1/embeddings";

struct EmbeddingsCall {
  EmbedRequest request;
  bool base64 = false;
  int64_t dimensions = 0;  // 0 = not asked; checked against the model once it is known.
};

Result<EmbeddingsCall> ParseEmbeddingsRequest(HttpExchange& exchange) {
  auto body = ParseJsonObject(exchange.TakeBody());  // Not held while the request waits.
  if (!body.ok()) return body.status();
  const nlohmann::json& j = *body;
  EmbeddingsCall call;
  EmbedRequest& req = call.request;
  auto input = ReadStringOrStringArray(j, "input");
  if (!input.ok()) return input.status();
  req.inputs = std::move(input).value();

  auto model = ReadOptionalString(j, "model");
  if (!model.ok()) return model.status();
  req.model = model->value_or("default");

  auto format = ReadOptionalString(j, "encoding_format");
  if (!format.ok()) return format.status();
  const std::string f = format->value_or("float");
  if (f != "float" && f != "base64") {
    return Status::InvalidArgument("field 'encoding_format' must be 'float' or 'base64', got '" +
                                   f + "'");
  }
  call.base64 = f == "base64";

  auto dims = ReadOptionalInt(j, "dimensions");
  if (!dims.ok()) return dims.status();
  if (dims->has_value() && **dims <= 0) {
    return Status::InvalidArgument("field 'dimensions' must be a positive integer");
  }
  auto precision = ReadOptionalString(j, "precision");
  if (!precision.ok()) return precision.status();
  req.precision = precision->value_or("");
  if (auto user = ReadOptionalString(j, "user"); !user.ok()) return user.status();
  call.dimensions = dims->value_or(0);
  return call;
}

std::string FormatEmbeddings(const EmbedResult& r, bool base64, const std::string& model_name) {
  std::string out;
  const size_t n = r.token_counts.size();
  out.reserve(64 + n * (base64 ? r.dimensions * 6 : r.dimensions * 11 + 48));
  out += "{\"object\":\"list\",\"data\":[";
  int64_t tokens = 0;
  for (size_t i = 0; i < n; ++i) {
    if (i) out += ',';
    out += "{\"object\":\"embedding\",\"index\":" + std::to_string(i) + ",\"embedding\":";
    std::span<const float> row(r.embeddings.data() + i * r.dimensions, r.dimensions);
    if (base64) {
      // OpenAI's base64 format: the little-endian float32 bytes (x86 is little-endian).
      out += '"';
      out += Base64Encode(std::span<const unsigned char>(
          reinterpret_cast<const unsigned char*>(row.data()), row.size() * sizeof(float)));
      out += '"';
    } else {
      AppendFloatArray(row, &out);
    }
    out += '}';
    tokens += r.token_counts[i];
  }
  out += "],\"model\":";
  AppendJsonString(model_name, &out);
  out += ",\"usage\":{\"prompt_tokens\":" + std::to_string(tokens) +
         ",\"total_tokens\":" + std::to_string(tokens) + "}}";
  return out;
}

void HandleEmbeddings(ApiContext& ctx, const HttpExchangePtr& exchange) {
  const int64_t parse_start = ctx.clock().NowMicros();
  auto parsed = ParseEmbeddingsRequest(*exchange);
  if (!parsed.ok()) {
    return ctx.FinishError(exchange, kEmbeddingsRoute, "", parsed.status(), ErrorStyle::kOpenAi);
  }
  EmbedRequest req = std::move(parsed->request);
  const bool base64 = parsed->base64;
  const int64_t dimensions = parsed->dimensions;
  req.timings.parse_micros = ctx.clock().NowMicros() - parse_start;
  auto deadline = ctx.DeadlineFromHeaders(*exchange);
  if (!deadline.ok()) {
    return ctx.FinishError(exchange, kEmbeddingsRoute, req.model, deadline.status(),
                           ErrorStyle::kOpenAi, req.timings);
  }
  req.deadline_micros = *deadline;
  const std::string requested_model = req.model;
  ctx.Embed(*exchange, std::move(req), [&ctx, exchange, base64, dimensions,
                                        requested_model](Result<EmbedResult> result) {
    if (!result.ok()) {
      return ctx.FinishError(exchange, kEmbeddingsRoute, requested_model, result.status(),
                             ErrorStyle::kOpenAi);
    }
    if (dimensions != 0 && dimensions != result->dimensions) {
      return ctx.FinishError(
          exchange, kEmbeddingsRoute, result->model,
          Status::InvalidArgument("model '" + result->model + "' gives " +
                                  std::to_string(result->dimensions) +
                                  " dimensions and cannot shorten them; omit 'dimensions' or "
                                  "send " + std::to_string(result->dimensions)),
          ErrorStyle::kOpenAi, result->timings);
    }
    const int64_t start = ctx.clock().NowMicros();
    HttpResponse res;
    // Answer with the name the client used, as OpenAI does.
    res.body = FormatEmbeddings(*result, base64, requested_model);
    StageTimings t = result->timings;
    t.serialize_micros = ctx.clock().NowMicros() - start;
    AddVariantHeaders(*result, &res);
    ctx.Finish(exchange, kEmbeddingsRoute, result->model, std::move(res), t);
  });
}

nlohmann::json ModelObject(const ModelDescription& d) {
  nlohmann::json j = {{"id", d.name},
                      {"object", "model"},
                      {"created", 0},
                      {"owned_by", "tailcut"},
                      {"kind", d.kind},
                      {"state", ModelStateName(d.state)}};
  if (!d.variant_details.empty()) j["precision"] = PrecisionJson(d);
  return j;
}

}  // namespace

void AddOpenAiRoutes(Router& router, ApiContext& ctx) {
  router.Add("POST", std::string(kEmbeddingsRoute),
             [&ctx](const HttpExchangePtr& ex) { HandleEmbeddings(ctx, ex); });
  router.Add("GET", "/v1/models", [&ctx](const HttpExchangePtr& ex) {
    nlohmann::json data = nlohmann::json::array();
    for (const auto& d : ctx.api().ListModels()) data.push_back(ModelObject(d));
    HttpResponse res;
    res.body = nlohmann::json{{"object", "list"}, {"data", data}}.dump();
    ctx.Finish(ex, "/v1/models", "", std::move(res), {});
  });
  router.Add("GET", "/v1/models/{model}", [&ctx](const HttpExchangePtr& ex) {
    const std::string name = ex->params["model"];
    auto d = ctx.api().DescribeModel(name);
    if (!d.ok()) {
      return ctx.FinishError(ex, "/v1/models/{model}", name, d.status(), ErrorStyle::kOpenAi);
    }
    HttpResponse res;
    res.body = ModelObject(*d).dump();
    ctx.Finish(ex, "/v1/models/{model}", d->name, std::move(res), {});
  });
}

}  // namespace tailcut
