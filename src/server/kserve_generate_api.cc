#include "server/kserve_generate_api.h"

#include "server/generation_params.h"
#include "server/generation_sink.h"
#include "server/json_body.h"

namespace tailcut {
namespace {

constexpr std::string_view kGenerateRoute = "/v2/models/{name}/generate";
constexpr std::string_view kGenerateStreamRoute = "/v2/models/{name}/generate_stream";

Result<GenerateRequest> ParseGenerate(std::string_view body_text, const std::string& model,
                                      bool stream_route) {
  auto body = ParseJsonObject(body_text);
  if (!body.ok()) return body.status();
  const nlohmann::json& j = *body;
  GenerateRequest req;
  req.model = model;
  auto text = j.find("text_input");
  if (text == j.end() || text->is_null()) {
    return Status::InvalidArgument("field 'text_input' is required");
  }
  if (!text->is_string()) {
    return Status::InvalidArgument("field 'text_input' must be a string, got " +
                                   JsonTypeName(*text));
  }
  req.prompt = text->get<std::string>();
  auto params = j.find("parameters");
  if (params != j.end() && !params->is_null()) {
    if (!params->is_object()) {
      return Status::InvalidArgument("field 'parameters' must be an object, got " +
                                     JsonTypeName(*params));
    }
    if (Status s = ReadKServeGenerateParameters(*params, stream_route, &req); !s.ok()) return s;
  }
  return req;
}

}  // namespace

Status ReadKServeGenerateParameters(const nlohmann::json& params, bool stream_allowed,
                                    GenerateRequest* req) {
  if (Status s = ReadGenerationParams(params, "parameters.", false, req); !s.ok()) return s;
  // A precision variant pin, as KServe inference requests take it.
  auto precision = ReadOptionalString(params, "precision");
  if (!precision.ok()) {
    return Status::InvalidArgument("field 'parameters.precision' must be a string");
  }
  req->precision = precision->value_or("");
  auto stream = params.find("stream");
  if (stream != params.end() && !stream->is_null()) {
    if (!stream->is_boolean()) {
      return Status::InvalidArgument("field 'parameters.stream' must be a boolean, got " +
                                     JsonTypeName(*stream));
    }
    if (stream->get<bool>() && !stream_allowed) {
      return Status::InvalidArgument(
          "field 'parameters.stream' is true: streamed answers come from generate_stream");
    }
  }
  return Status::Ok();
}

namespace {

std::string Output(const std::string& model, std::string_view text) {
  std::string out = "{\"model_name\":";
  AppendJsonString(model, &out);
  out += ",\"model_version\":\"1\",\"text_output\":";
  AppendJsonString(text, &out);
  out += '}';
  return out;
}

class TritonEvents final : public GenerationEvents {
 public:
  explicit TritonEvents(std::string model) : model_(std::move(model)) {}
  std::vector<std::string> Start(const GenerationStart&) override { return {}; }
  std::string Text(const GenerationPiece& piece) override {
    return piece.text.empty() ? std::string() : Output(model_, piece.text);
  }
  std::vector<std::string> End(const GenerationEnd&) override { return {}; }
  std::string Error(const Status& status) override {
    return ErrorResponse(status, ErrorStyle::kKServe).body;
  }
  bool done_marker() const override { return false; }

 private:
  const std::string model_;
};

void HandleGenerate(ApiContext& ctx, const HttpExchangePtr& exchange, bool stream) {
  const std::string_view route = stream ? kGenerateStreamRoute : kGenerateRoute;
  const std::string model = exchange->params["name"];
  const int64_t parse_start = ctx.clock().NowMicros();
  auto parsed = ParseGenerate(exchange->TakeBody(), model, stream);
  if (!parsed.ok()) {
    return ctx.FinishError(exchange, route, model, parsed.status(), ErrorStyle::kKServe);
  }
  GenerateRequest req = std::move(parsed).value();
  const int64_t parse_micros = ctx.clock().NowMicros() - parse_start;
  req.timings.parse_micros = parse_micros;
  auto deadline = ctx.DeadlineFromHeaders(*exchange);
  if (!deadline.ok()) {
    return ctx.FinishError(exchange, route, model, deadline.status(), ErrorStyle::kKServe,
                           req.timings);
  }
  req.deadline_micros = *deadline;
  req.received_micros = exchange->received_micros();
  GenerationSinkPtr sink;
  if (stream) {
    sink = std::make_shared<StreamingGenerationSink>(
        ctx, exchange,
        GenerationRoute{std::string(route), model, ErrorStyle::kKServe, parse_micros},
        std::make_unique<TritonEvents>(model));
  } else {
    sink = std::make_shared<CollectingGenerationSink>(
        ctx, false, parse_micros, [&ctx, exchange, route, model](Result<GeneratedText> r) {
          if (!r.ok()) {
            return ctx.FinishError(exchange, route, model, r.status(), ErrorStyle::kKServe);
          }
          const int64_t start = ctx.clock().NowMicros();
          FinishGenerated(ctx, exchange, route, *r, Output(model, r->text), start);
        });
  }
  ctx.Generate(*exchange, std::move(req), std::move(sink));
}

}  // namespace

void AddKServeGenerateRoutes(Router& router, ApiContext& ctx) {
  router.Add("POST", std::string(kGenerateRoute),
             [&ctx](const HttpExchangePtr& ex) { HandleGenerate(ctx, ex, /*stream=*/false); });
  router.Add("POST", std::string(kGenerateStreamRoute),
             [&ctx](const HttpExchangePtr& ex) { HandleGenerate(ctx, ex, /*stream=*/true); });
}

}  // namespace tailcut
