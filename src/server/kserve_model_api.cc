#include "server/kserve_model_api.h"

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

#include "server/kserve_protocol_tensors.h"
#include "server/variant_json.h"

namespace tailcut {
namespace {

nlohmann::json MetadataJson(const std::vector<ProtocolTensor>& tensors) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& t : tensors) {
    out.push_back({{"name", t.name}, {"datatype", t.datatype}, {"shape", t.shape}});
  }
  return out;
}

// Triton's config: with max_batch_size > 0, "dims" leave out the batch axis, which every
// tensor of the model then has first.
nlohmann::json ConfigTensorsJson(const std::vector<ProtocolTensor>& tensors, bool batched) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& t : tensors) {
    std::vector<int64_t> dims(t.shape.begin() + (batched && !t.shape.empty() ? 1 : 0),
                              t.shape.end());
    if (dims.empty()) dims.push_back(1);  // Triton's convention for one value per row.
    const std::string type = t.datatype == "BYTES" ? "TYPE_STRING" : "TYPE_" + t.datatype;
    out.push_back({{"name", t.name}, {"data_type", type}, {"dims", dims}});
  }
  return out;
}

nlohmann::json DurationJson(const ModelRequestStats::Duration& d) {
  return {{"count", d.count}, {"ns", d.ns}};
}

nlohmann::json StatsJson(const std::string& name, const ModelRequestStats::Totals& t) {
  // Triton also reports inference_count and execution_count (rows and batches run); the
  // front-end sees requests, not rows or batches, so they are left out rather than guessed.
  return {{"name", name},
          {"version", "1"},
          {"last_inference", t.last_inference_unix_millis},
          {"inference_stats",
           {{"success", DurationJson(t.success)},
            {"fail", DurationJson(t.fail)},
            {"queue", DurationJson(t.queue)},
            {"compute_input", DurationJson(t.compute_input)},
            {"compute_infer", DurationJson(t.compute_infer)},
            {"compute_output", DurationJson(t.compute_output)}}},
          {"batch_stats", nlohmann::json::array()}};
}


// GET `pattern` (with {name}): the model's description, or the KServe error for a name that
// is not served; `answer` makes the response from the description.
void AddDescribedModelRoute(Router& router, ApiContext& ctx, std::string_view pattern,
                            std::function<HttpResponse(const ModelDescription&)> answer) {
  router.Add("GET", std::string(pattern),
             [&ctx, pattern, answer = std::move(answer)](const HttpExchangePtr& ex) {
               const std::string name = ex->params["name"];
               auto d = ctx.api().DescribeModel(name);
               if (!d.ok()) {
                 return ctx.FinishError(ex, pattern, name, d.status(), ErrorStyle::kKServe);
               }
               ctx.Finish(ex, pattern, d->name, answer(*d), {});
             });
}

HttpResponse JsonResponse(const nlohmann::json& body, unsigned status = 200) {
  HttpResponse res;
  res.status = status;
  res.body = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return res;
}

}  // namespace

void AddKServeModelRoutes(Router& router, ApiContext& ctx) {
  auto stats = [&ctx](const HttpExchangePtr& ex, const std::string& only) {
    constexpr std::string_view kRoute = "/v2/models/{name}/stats";
    nlohmann::json list = nlohmann::json::array();
    std::vector<ModelDescription> models;
    if (only.empty()) {
      models = ctx.api().ListModels();
    } else {
      auto d = ctx.api().DescribeModel(only);
      if (!d.ok()) return ctx.FinishError(ex, kRoute, only, d.status(), ErrorStyle::kKServe);
      models.push_back(std::move(d).value());
    }
    for (const auto& d : models) {
      const ModelRequestStats* s = ctx.StatsFor(d.name);
      list.push_back(StatsJson(d.name, s ? s->Snapshot() : ModelRequestStats::Totals{}));
    }
    ctx.Finish(ex, kRoute, only.empty() ? "" : models.front().name,
               JsonResponse({{"model_stats", list}}), {});
  };
  // Before /v2/models/{name}, which would take "stats" for a model's name (so a model named
  // "stats" has no metadata route).
  router.Add("GET", "/v2/models/stats",
             [stats](const HttpExchangePtr& ex) { stats(ex, ""); });
  router.Add("GET", "/v2/models/{name}/stats",
             [stats](const HttpExchangePtr& ex) { stats(ex, ex->params["name"]); });
  AddDescribedModelRoute(router, ctx, "/v2/models/{name}", [](const ModelDescription& d) {
    std::vector<ProtocolTensor> inputs, outputs;
    ProtocolTensors(d, &inputs, &outputs);
    nlohmann::json j = {{"name", d.name},
                        {"versions", {"1"}},
                        {"platform", ProtocolPlatform(d)},
                        {"kind", d.kind},
                        {"state", ModelStateName(d.state)},
                        {"inputs", MetadataJson(inputs)},
                        {"outputs", MetadataJson(outputs)},
                        {"max_batch_size", d.max_batch_size},
                        {"variants", d.variants},
                        {"active_variant", d.active_variant},
                        {"file_digest", d.version}};
    if (d.kind == "text-embedding") {
      j["engine_inputs"] = MetadataJson(ProtocolTensorsFromSpecs(d.inputs));
      j["engine_outputs"] = MetadataJson(ProtocolTensorsFromSpecs(d.outputs));
      j["dimensions"] = d.dimensions;
      j["max_sequence_length"] = d.max_sequence_length;
    }
    if (!d.variant_details.empty()) j["precision"] = PrecisionJson(d);
    if (!d.error.empty()) j["error"] = d.error;
    return JsonResponse(j);
  });
  AddDescribedModelRoute(router, ctx, "/v2/models/{name}/ready", [](const ModelDescription& d) {
    const bool ready = d.state == ModelState::kReady;
    return JsonResponse({{"name", d.name}, {"ready", ready}}, ready ? 200 : 503);
  });
  AddDescribedModelRoute(router, ctx, "/v2/models/{name}/config", [](const ModelDescription& d) {
    std::vector<ProtocolTensor> inputs, outputs;
    ProtocolTensors(d, &inputs, &outputs);
    // Batched along a first axis of any size: text models always; generation runs one
    // prompt a request (its sequences are batched by the step loop, not by the client).
    bool batched = d.kind == "text-embedding" && d.max_batch_size > 0;
    if (d.kind == "tensor" && d.max_batch_size > 1) {
      batched = true;
      for (const auto* list : {&inputs, &outputs}) {
        for (const auto& t : *list) batched = batched && !t.shape.empty() && t.shape[0] == -1;
      }
    }
    nlohmann::json j = {{"name", d.name},
                        {"platform", ProtocolPlatform(d)},
                        {"backend", d.kind == "generative" ? "llama.cpp" : "onnxruntime"},
                        {"max_batch_size", batched ? d.max_batch_size : 0},
                        {"input", ConfigTensorsJson(inputs, batched)},
                        {"output", ConfigTensorsJson(outputs, batched)}};
    if (batched) j["dynamic_batching"] = nlohmann::json::object();
    // Generation streams several responses per request (generate_stream).
    if (d.kind == "generative") j["model_transaction_policy"] = {{"decoupled", true}};
    return JsonResponse(j);
  });
  router.Add("POST", "/v2/repository/index", [&ctx](const HttpExchangePtr& ex) {
    constexpr std::string_view kRoute = "/v2/repository/index";
    // {"ready": true} lists only the models ready to serve; an empty body lists all.
    bool ready_only = false;
    const std::string body = ex->TakeBody();
    if (!body.empty()) {
      auto j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded() || !j.is_object()) {
        return ctx.FinishError(ex, kRoute, "",
                               Status::InvalidArgument("the body must be a JSON object"),
                               ErrorStyle::kKServe);
      }
      if (auto r = j.find("ready"); r != j.end()) {
        if (!r->is_boolean()) {
          return ctx.FinishError(ex, kRoute, "",
                                 Status::InvalidArgument("field 'ready' must be a boolean"),
                                 ErrorStyle::kKServe);
        }
        ready_only = r->get<bool>();
      }
    }
    nlohmann::json list = nlohmann::json::array();
    for (const auto& d : ctx.api().ListModels()) {
      if (ready_only && d.state != ModelState::kReady) continue;
      list.push_back({{"name", d.name},
                      {"version", "1"},
                      {"state", ModelStateName(d.state)},
                      {"reason", d.error}});
    }
    ctx.Finish(ex, kRoute, "", JsonResponse(list), {});
  });
}

}  // namespace tailcut
