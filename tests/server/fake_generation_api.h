// FakeGenerationApi: an InferenceApi whose Generate() plays a scripted sequence of sink calls
// on the caller's thread, and records the requests it was given; with ApiContext built
// without a work pool, a front-end's whole answer is then written before Dispatch() returns.
// GenerationHarness wires it to a router with the generation routes, for FakeExchanges.
//
// Thread-safety: none; one test thread (a shared script may play its sink on another).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/inference_api.h"
#include "obs/metrics.h"
#include "server/api_context.h"
#include "server/router.h"
#include "tests/server/fake_exchange.h"

namespace tailcut {

class FakeGenerationApi final : public InferenceApi {
 public:
  using Script = std::function<void(const GenerateRequest&, GenerationSink&)>;
  // Given the sink itself, e.g. to play it on another thread, as the step loop does.
  using SharedScript = std::function<void(const GenerateRequest&, GenerationSinkPtr)>;

  // Admitted, "Hel" + "lo", stop: what a generative model would do for a short answer.
  static void Hello(const GenerateRequest&, GenerationSink& sink) {
    sink.OnStart({"smol", "q8_0", 5, 120, "", 0, 0});
    sink.OnText({"Hel", 1, -0.5f});
    sink.OnText({"", 1, -0.1f});  // A token whose text is held back.
    sink.OnText({"lo", 1, -0.25f});
    GenerationEnd end;
    end.model = "smol";
    end.variant = "q8_0";
    end.finish_reason = "stop";
    end.usage = {5, 3, 2};
    sink.OnEnd(std::move(end));
  }

  void Embed(EmbedRequest, EmbedCallback done) override {
    done(Status::FailedPrecondition("fake: no embeddings"));
  }
  void Infer(TensorRequest, TensorCallback done) override {
    done(Status::FailedPrecondition("fake: no tensors"));
  }
  void Generate(GenerateRequest request, GenerationSinkPtr sink) override {
    requests.push_back(std::move(request));
    if (shared_script) return shared_script(requests.back(), std::move(sink));
    script(requests.back(), *sink);
  }
  std::vector<ModelDescription> ListModels() const override {
    ModelDescription embed;
    embed.name = "minilm";
    embed.kind = "text-embedding";
    embed.state = ModelState::kReady;
    ModelDescription gen;
    gen.name = "smol";
    gen.kind = "generative";
    gen.state = ModelState::kReady;
    return {embed, gen};
  }
  Result<ModelDescription> DescribeModel(const std::string& name) const override {
    for (auto& d : ListModels()) {
      if (d.name == name) return d;
    }
    return Status::NotFound("model '" + name + "' is not served");
  }
  std::string default_model() const override { return "minilm"; }
  bool Ready() const override { return true; }

  Script script = Hello;
  SharedScript shared_script;  // Used instead of `script` when set.
  std::vector<GenerateRequest> requests;
};

// The parsed events of an SSE body: each "data: ..." payload, in order.
inline std::vector<std::string> SseData(const std::string& body) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < body.size()) {
    const size_t end = body.find("\n\n", start);
    EXPECT_NE(end, std::string::npos) << "unterminated event in: " << body;
    if (end == std::string::npos) break;
    const std::string event = body.substr(start, end - start);
    EXPECT_EQ(event.rfind("data: ", 0), 0u) << event;
    out.push_back(event.substr(6));
    start = end + 2;
  }
  return out;
}

class GenerationHarness {
 public:
  explicit GenerationHarness(void (*add_routes)(Router&, ApiContext&)) {
    add_routes(router, context);
  }

  std::shared_ptr<FakeExchange> Post(
      const std::string& target, const std::string& body,
      const std::vector<std::pair<std::string, std::string>>& headers = {}) {
    auto ex = std::make_shared<FakeExchange>("POST", target, /*received_micros=*/1'000'000);
    ex->WithBody(body);
    for (const auto& [k, v] : headers) ex->With(k, v);
    router.Dispatch(ex);
    EXPECT_TRUE(ex->response().has_value()) << target << " " << body;
    return ex;
  }
  std::shared_ptr<FakeExchange> Get(const std::string& target) {
    auto ex = std::make_shared<FakeExchange>("GET", target);
    router.Dispatch(ex);
    return ex;
  }

  FakeGenerationApi api;
  MetricsRegistry metrics;
  ApiContext context{api, metrics, ApiContextOptions{}};
  Router router;
};

}  // namespace tailcut
