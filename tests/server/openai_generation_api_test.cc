#include "server/openai_generation_api.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/openai_api.h"
#include "tests/server/fake_generation_api.h"

namespace tailcut {
namespace {

using nlohmann::json;

void AddRoutes(Router& router, ApiContext& context) {
  AddOpenAiRoutes(router, context);
  AddOpenAiGenerationRoutes(router, context);
}

class OpenAiGenerationTest : public ::testing::Test {
 protected:
  GenerationHarness h{AddRoutes};
};

TEST_F(OpenAiGenerationTest, CompletionPassesItsFieldsToTheCoreAndAnswersInOpenAisShape) {
  auto ex = h.Post("/v1/completions", R"({"model": "smol", "prompt": "Say hi", "max_tokens": 7,
      "temperature": 0.5, "top_p": 0.9, "top_k": 40, "seed": 42, "stop": ["\n", "END"],
      "presence_penalty": 0.5, "frequency_penalty": -0.5, "n": 1, "user": "u1"})");
  ASSERT_EQ(ex->response()->status, 200u) << ex->response()->body;
  ASSERT_EQ(h.api.requests.size(), 1u);
  const GenerateRequest& r = h.api.requests[0];
  EXPECT_EQ(r.model, "smol");
  EXPECT_FALSE(r.chat);
  EXPECT_EQ(r.prompt, "Say hi");
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.9f);
  EXPECT_EQ(r.sampling.top_k, 40);
  EXPECT_EQ(r.sampling.seed, 42u);
  EXPECT_FLOAT_EQ(r.sampling.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(r.sampling.frequency_penalty, -0.5f);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"\n", "END"}));
  EXPECT_FALSE(r.logprobs);
  EXPECT_EQ(r.received_micros, 1'000'000);
  EXPECT_EQ(r.deadline_micros, 0);

  const json body = json::parse(ex->response()->body);
  EXPECT_EQ(body["id"].get<std::string>().rfind("cmpl-", 0), 0u) << body.dump();
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_GT(body["created"].get<int64_t>(), 1'600'000'000);
  EXPECT_EQ(body["model"], "smol");
  ASSERT_EQ(body["choices"].size(), 1u);
  EXPECT_EQ(body["choices"][0], json::parse(R"({"index": 0, "text": "Hello",
      "finish_reason": "stop", "logprobs": null})"));
  EXPECT_EQ(body["usage"]["prompt_tokens"], 5);
  EXPECT_EQ(body["usage"]["completion_tokens"], 3);
  EXPECT_EQ(body["usage"]["total_tokens"], 8);
  EXPECT_EQ(body["usage"]["prompt_tokens_details"]["cached_tokens"], 2);
  const std::string timing = ex->response_header("Server-Timing");
  for (const char* stage : {"parse;dur=", "queue;dur=0.120",
                            "prefill;dur=", "decode;dur=", "serialize;dur=", "total;dur="}) {
    EXPECT_NE(timing.find(stage), std::string::npos) << stage << " in " << timing;
  }
  EXPECT_EQ(ex->response_header("X-Tailcut-Variant"), "q8_0");
  EXPECT_FALSE(ex->response_header("traceparent").empty());
}

// The precision pin reaches the core as embedding requests' does, and every answer names the
// variant that generated it: the header and OpenAI's system_fingerprint, in the body and in
// every streamed chunk.
TEST_F(OpenAiGenerationTest, PassesThePrecisionPinAndNamesTheVariantInEveryAnswer) {
  auto ex = h.Post("/v1/completions", R"({"model": "smol", "prompt": "p", "precision": "q8_0"})");
  ASSERT_EQ(ex->response()->status, 200u) << ex->response()->body;
  EXPECT_EQ(h.api.requests.at(0).precision, "q8_0");
  EXPECT_EQ(json::parse(ex->response()->body)["system_fingerprint"], "q8_0");
  EXPECT_EQ(ex->response_header("X-Tailcut-Variant"), "q8_0");

  ex = h.Post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi"}],
      "stream": true})");
  ASSERT_TRUE(ex->stream());
  EXPECT_EQ(h.api.requests.at(1).precision, "");
  const auto events = SseData(ex->stream()->body());
  ASSERT_GE(events.size(), 2u);
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    EXPECT_EQ(json::parse(events[i])["system_fingerprint"], "q8_0") << events[i];
  }
  ex = h.Post("/v1/completions", R"({"prompt": "p", "precision": 8})");
  EXPECT_EQ(ex->response()->status, 400u);
  EXPECT_NE(ex->response()->body.find("precision"), std::string::npos);
}

TEST_F(OpenAiGenerationTest, ChatPassesItsMessagesAndAnswersWithAnAssistantMessage) {
  auto ex = h.Post("/v1/chat/completions", R"({"messages": [
      {"role": "developer", "content": "Be brief."},
      {"role": "user",
       "content": [{"type": "text", "text": "Hi"}, {"type": "text", "text": "there"}]},
      {"role": "assistant", "content": "Hello."},
      {"role": "user", "content": "Again"}], "max_completion_tokens": 9, "stop": "x"})");
  ASSERT_EQ(ex->response()->status, 200u) << ex->response()->body;
  const GenerateRequest& r = h.api.requests.at(0);
  EXPECT_TRUE(r.chat);
  EXPECT_EQ(r.model, "default");
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[1].role, "user");
  EXPECT_EQ(r.messages[1].content, "Hi\nthere");
  EXPECT_EQ(r.messages[2].role, "assistant");
  EXPECT_EQ(r.max_tokens, 9);
  EXPECT_EQ(r.stop, std::vector<std::string>{"x"});
  const json body = json::parse(ex->response()->body);
  EXPECT_EQ(body["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["model"], "smol");  // "default" answers with the model's name.
  EXPECT_EQ(body["choices"][0], json::parse(R"({"index": 0, "finish_reason": "stop",
      "message": {"role": "assistant", "content": "Hello"}, "logprobs": null})"));
  EXPECT_EQ(body["usage"]["total_tokens"], 8);

  // Without max_tokens, a chat answer runs until it ends; a completion gets OpenAI's 16.
  h.Post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi"}]})");
  EXPECT_EQ(h.api.requests.at(1).max_tokens, 0);
  h.Post("/v1/completions", R"({"prompt": "p"})");
  EXPECT_EQ(h.api.requests.at(2).max_tokens, 16);
}

TEST_F(OpenAiGenerationTest, StreamedCompletionSendsOneChunkPerPieceThenTheFinishAndDone) {
  auto ex = h.Post("/v1/completions", R"({"model": "smol", "prompt": "p", "stream": true})");
  ASSERT_TRUE(ex->stream());
  EXPECT_EQ(ex->response()->status, 200u);
  EXPECT_EQ(ex->response()->content_type, "text/event-stream; charset=utf-8");
  EXPECT_TRUE(ex->stream()->finished());
  const auto events = SseData(ex->stream()->body());
  ASSERT_EQ(events.size(), 4u) << ex->stream()->body();
  std::string id;
  for (size_t i = 0; i < 3; ++i) {
    const json chunk = json::parse(events[i]);
    if (i == 0) id = chunk["id"];
    EXPECT_EQ(chunk["id"], id);
    EXPECT_EQ(chunk["object"], "text_completion");
    EXPECT_EQ(chunk["model"], "smol");
    EXPECT_FALSE(chunk.contains("usage"));
    ASSERT_EQ(chunk["choices"].size(), 1u);
  }
  EXPECT_EQ(json::parse(events[0])["choices"][0],
            json::parse(R"({"index": 0, "text": "Hel", "logprobs": null, "finish_reason": null})"));
  EXPECT_EQ(json::parse(events[1])["choices"][0]["text"], "lo");
  EXPECT_EQ(json::parse(events[2])["choices"][0],
            json::parse(R"({"index": 0, "text": "", "logprobs": null, "finish_reason": "stop"})"));
  EXPECT_EQ(events[3], "[DONE]");
  // The stream's end is counted in the request metrics.
  EXPECT_NE(h.metrics.Serialize().find("tailcut_requests_total{route=\"/v1/completions\","
                                       "model=\"smol\",status=\"200\"} 1"),
            std::string::npos);
}

TEST_F(OpenAiGenerationTest, StreamedChatSendsTheRoleFirstAndUsageLastWhenAsked) {
  auto ex = h.Post("/v1/chat/completions", R"({"model": "smol", "stream": true,
      "stream_options": {"include_usage": true},
      "messages": [{"role": "user", "content": "hi"}]})");
  ASSERT_TRUE(ex->stream());
  const auto events = SseData(ex->stream()->body());
  ASSERT_EQ(events.size(), 6u) << ex->stream()->body();
  for (size_t i = 0; i < 5; ++i) {
    const json chunk = json::parse(events[i]);
    EXPECT_EQ(chunk["object"], "chat.completion.chunk");
    EXPECT_EQ(chunk["id"], json::parse(events[0])["id"]);
    EXPECT_EQ(chunk["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
    if (i < 4) {
      EXPECT_TRUE(chunk["usage"].is_null()) << i;
    }
  }
  EXPECT_EQ(json::parse(events[0])["choices"][0],
            json::parse(R"({"index": 0, "delta": {"role": "assistant", "content": ""},
                "logprobs": null, "finish_reason": null})"));
  EXPECT_EQ(json::parse(events[1])["choices"][0]["delta"], json::parse(R"({"content": "Hel"})"));
  EXPECT_EQ(json::parse(events[2])["choices"][0]["delta"], json::parse(R"({"content": "lo"})"));
  EXPECT_EQ(json::parse(events[3])["choices"][0],
            json::parse(R"({"index": 0, "delta": {}, "logprobs": null, "finish_reason": "stop"})"));
  const json usage = json::parse(events[4]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["prompt_tokens"], 5);
  EXPECT_EQ(usage["usage"]["completion_tokens"], 3);
  EXPECT_EQ(usage["usage"]["total_tokens"], 8);
  EXPECT_EQ(events[5], "[DONE]");
}

TEST_F(OpenAiGenerationTest, LogprobsComeOnePerPiece) {
  auto ex = h.Post("/v1/completions", R"({"prompt": "p", "logprobs": 0})");
  ASSERT_EQ(ex->response()->status, 200u) << ex->response()->body;
  EXPECT_TRUE(h.api.requests.at(0).logprobs);
  EXPECT_EQ(json::parse(ex->response()->body)["choices"][0]["logprobs"],
            json::parse(R"({"tokens": ["Hel", "lo"], "token_logprobs": [-0.5, -0.25],
                "top_logprobs": null, "text_offset": [0, 3]})"));

  ex = h.Post("/v1/chat/completions",
              R"({"messages": [{"role": "user", "content": "hi"}], "logprobs": true,
                  "top_logprobs": 0, "stream": true})");
  const auto events = SseData(ex->stream()->body());
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(json::parse(events[1])["choices"][0]["logprobs"],
            json::parse(R"({"content": [{"token": "Hel", "logprob": -0.5,
                "bytes": [72, 101, 108], "top_logprobs": []}]})"));

  ex = h.Post("/v1/chat/completions",
              R"({"messages": [{"role": "user", "content": "hi"}], "logprobs": true})");
  const json content = json::parse(ex->response()->body)["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 3u);  // The held-back token's empty piece too.
  EXPECT_EQ(content[2]["token"], "lo");
}

struct ErrorCase {
  Status status;
  unsigned http;
};

TEST_F(OpenAiGenerationTest, ARequestRefusedBeforeAdmissionGetsAJsonErrorWithItsStatus) {
  const ErrorCase cases[] = {
      {Status::InvalidArgument("prompt (900 tokens) plus max_tokens (200) exceed 1024"), 400},
      {Status::NotFound("model 'nope' is not served"), 404},
      {Status::FailedPrecondition("text generation is not served yet"), 409},
      {Status::ResourceExhausted("too many sequences"), 429},
      {Status::Cancelled("client gone"), 499},
      {Status::Unavailable("shutting down"), 503},
      {Status::DeadlineExceeded("deadline passed in the queue"), 504},
  };
  for (const bool stream : {false, true}) {
    for (const ErrorCase& c : cases) {
      h.api.script = [&c](const GenerateRequest&, GenerationSink& sink) { sink.OnEnd(c.status); };
      auto ex = h.Post(
          "/v1/chat/completions",
          json{{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"stream", stream}}.dump());
      EXPECT_FALSE(ex->stream()) << "no stream before admission";
      EXPECT_EQ(ex->response()->status, c.http) << c.status.message();
      const json body = json::parse(ex->response()->body);
      EXPECT_EQ(body["error"]["message"], c.status.message());
      EXPECT_EQ(body["error"]["code"], c.http);
      EXPECT_EQ(ex->response()->content_type, "application/json");
      if (c.http == 429 || c.http == 503) {
        EXPECT_EQ(ex->response_header("Retry-After"), "1");
      }
    }
  }
}

TEST_F(OpenAiGenerationTest, AnErrorAfterTheStreamStartedIsAnErrorEventAndTheBodyEnds) {
  h.api.script = [](const GenerateRequest&, GenerationSink& sink) {
    sink.OnStart({"smol", "q8_0", 5, 0, "", 0, 0});
    sink.OnText({"Hel", 1, 0});
    sink.OnEnd(Status::DeadlineExceeded("the deadline passed while generating"));
  };
  auto ex = h.Post("/v1/completions", R"({"prompt": "p", "stream": true})");
  ASSERT_TRUE(ex->stream());
  const auto events = SseData(ex->stream()->body());
  ASSERT_EQ(events.size(), 2u) << ex->stream()->body();
  EXPECT_EQ(json::parse(events[0])["choices"][0]["text"], "Hel");
  const json error = json::parse(events[1]);
  EXPECT_EQ(error["error"]["message"], "the deadline passed while generating");
  EXPECT_EQ(error["error"]["code"], 504);
  EXPECT_TRUE(ex->stream()->finished());  // No [DONE]: the body just ends.
}

TEST_F(OpenAiGenerationTest, TheDeadlineHeaderAndTheClientsCancellationReachTheCore) {
  auto ex = h.Post("/v1/completions", R"({"prompt": "p"})", {{"X-Request-Timeout-Ms", "250"}});
  ASSERT_EQ(ex->response()->status, 200u);
  const GenerateRequest& r = h.api.requests.at(0);
  EXPECT_EQ(r.deadline_micros, 1'000'000 + 250'000);
  EXPECT_FALSE(IsCancelled(r.cancellation));
  ex->Cancel();  // The client goes away: the core sees it on the request it holds.
  EXPECT_TRUE(IsCancelled(h.api.requests.at(0).cancellation));

  ex = h.Post("/v1/completions", R"({"prompt": "p"})", {{"X-Request-Timeout-Ms", "soon"}});
  EXPECT_EQ(ex->response()->status, 400u);
  EXPECT_EQ(h.api.requests.size(), 1u);
}

TEST_F(OpenAiGenerationTest, PiecesAfterTheStreamClosedAreNotWritten) {
  std::shared_ptr<FakeExchange> exchange;
  h.api.script = [&exchange](const GenerateRequest&, GenerationSink& sink) {
    sink.OnStart({"smol", "q8_0", 5, 0, "", 0, 0});
    sink.OnText({"one", 1, 0});
    exchange->stream()->Close();  // The client went away (or read too slowly).
    sink.OnText({"two", 1, 0});
    sink.OnEnd(Status::Cancelled("the client went away"));
  };
  exchange = std::make_shared<FakeExchange>("POST", "/v1/completions");
  exchange->WithBody(R"({"prompt": "p", "stream": true})");
  h.router.Dispatch(exchange);
  ASSERT_TRUE(exchange->stream());
  const auto events = SseData(exchange->stream()->body());
  ASSERT_EQ(events.size(), 1u) << exchange->stream()->body();
  EXPECT_EQ(json::parse(events[0])["choices"][0]["text"], "one");
  EXPECT_NE(h.metrics.Serialize().find("status=\"499\"} 1"), std::string::npos);
}

TEST_F(OpenAiGenerationTest, ModelsListsGenerativeModels) {
  auto ex = h.Get("/v1/models");
  ASSERT_EQ(ex->response()->status, 200u);
  const json data = json::parse(ex->response()->body)["data"];
  ASSERT_EQ(data.size(), 2u);
  EXPECT_EQ(data[1]["id"], "smol");
  EXPECT_EQ(data[1]["kind"], "generative");
  EXPECT_EQ(data[1]["object"], "model");
}

struct BadInput {
  const char* route;
  const char* body;
  const char* names;  // What the error message must contain (the field).
};

TEST_F(OpenAiGenerationTest, BadInputIsA400NamingTheField) {
  const char* kChat = "/v1/chat/completions";
  const BadInput cases[] = {
      {"/v1/completions", R"({"prompt": "p")", "not valid JSON"},
      {"/v1/completions", R"(["p"])", "JSON object"},
      {"/v1/completions", "", "empty"},
      {"/v1/completions", R"({})", "'prompt' is required"},
      {"/v1/completions", R"({"prompt": 5})", "'prompt'"},
      {"/v1/completions", R"({"prompt": ["a", "b"]})", "'prompt'"},
      {"/v1/completions", R"({"prompt": [1, 2]})", "'prompt'"},
      {"/v1/completions", R"({"prompt": []})", "'prompt'"},
      {"/v1/completions", R"({"prompt": "p", "model": 5})", "'model'"},
      {"/v1/completions", R"({"prompt": "p", "max_tokens": 0})", "'max_tokens'"},
      {"/v1/completions", R"({"prompt": "p", "max_tokens": -3})", "'max_tokens'"},
      {"/v1/completions", R"({"prompt": "p", "max_tokens": "10"})", "'max_tokens'"},
      {"/v1/completions", R"({"prompt": "p", "max_tokens": 1.5})", "'max_tokens'"},
      {"/v1/completions", R"({"prompt": "p", "temperature": -0.1})", "'temperature'"},
      {"/v1/completions", R"({"prompt": "p", "temperature": 2.5})", "'temperature'"},
      {"/v1/completions", R"({"prompt": "p", "temperature": "hot"})", "'temperature'"},
      {"/v1/completions", R"({"prompt": "p", "top_p": 0})", "'top_p'"},
      {"/v1/completions", R"({"prompt": "p", "top_p": 1.5})", "'top_p'"},
      {"/v1/completions", R"({"prompt": "p", "top_k": -2})", "'top_k'"},
      {"/v1/completions", R"({"prompt": "p", "seed": -1})", "'seed'"},
      {"/v1/completions", R"({"prompt": "p", "seed": 0.5})", "'seed'"},
      {"/v1/completions", R"({"prompt": "p", "n": 2})", "'n'"},
      {"/v1/completions", R"({"prompt": "p", "stop": ["a", "b", "c", "d", "e"]})", "'stop'"},
      {"/v1/completions", R"({"prompt": "p", "stop": 5})", "'stop'"},
      {"/v1/completions", R"({"prompt": "p", "stop": [1]})", "'stop[0]'"},
      {"/v1/completions", R"({"prompt": "p", "stop": [""]})", "'stop'"},
      {"/v1/completions", R"({"prompt": "p", "presence_penalty": 3})", "'presence_penalty'"},
      {"/v1/completions", R"({"prompt": "p", "frequency_penalty": -2.5})", "'frequency_penalty'"},
      {"/v1/completions", R"({"prompt": "p", "logprobs": 2})", "'logprobs'"},
      {"/v1/completions", R"({"prompt": "p", "logprobs": true})", "'logprobs'"},
      {"/v1/completions", R"({"prompt": "p", "stream": "yes"})", "'stream'"},
      {"/v1/completions", R"({"prompt": "p", "stream_options": {}})", "'stream_options'"},
      {"/v1/completions",
       R"({"prompt": "p", "stream": true, "stream_options": {"include_usage": 1}})",
       "'stream_options.include_usage'"},
      {"/v1/completions", R"({"prompt": "p", "echo": true})", "'echo'"},
      {"/v1/completions", R"({"prompt": "p", "best_of": 3})", "'best_of'"},
      {"/v1/completions", R"({"prompt": "p", "user": 7})", "'user'"},
      {kChat, R"({})", "'messages' is required"},
      {kChat, R"({"messages": []})", "'messages'"},
      {kChat, R"({"messages": {}})", "'messages'"},
      {kChat, R"({"messages": ["hi"]})", "'messages[0]'"},
      {kChat, R"({"messages": [{"role": "robot", "content": "x"}]})", "'messages[0].role'"},
      {kChat, R"({"messages": [{"content": "x"}]})", "'messages[0].role'"},
      {kChat, R"({"messages": [{"role": "user"}]})", "'messages[0].content'"},
      {kChat, R"({"messages": [{"role": "user", "content": 5}]})", "'messages[0].content'"},
      {kChat, R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
       "'messages[0].content[0].type'"},
      {kChat, R"({"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": 0})",
       "'max_completion_tokens'"},
      {kChat, R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 5,
                  "max_completion_tokens": 6})",
       "disagree"},
      {kChat, R"({"messages": [{"role": "user", "content": "x"}], "logprobs": 1})", "'logprobs'"},
      {kChat, R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true,
                  "top_logprobs": 3})",
       "'top_logprobs'"},
      {kChat, R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 0})",
       "'top_logprobs'"},
      {kChat, R"({"messages": [{"role": "user", "content": "x"}], "n": 3})", "'n'"},
      {kChat, R"({"messages": [{"role": "user", "content": "x"}], "tools": [{}]})", "'tools'"},
  };
  for (const BadInput& c : cases) {
    auto ex = h.Post(c.route, c.body);
    ASSERT_EQ(ex->response()->status, 400u) << c.route << " " << c.body;
    const json body = json::parse(ex->response()->body);
    const std::string message = body["error"]["message"];
    EXPECT_NE(message.find(c.names), std::string::npos) << c.body << " -> " << message;
    EXPECT_EQ(body["error"]["code"], 400) << c.body;
    EXPECT_EQ(body["error"]["type"], "invalid_request_error") << c.body;
  }
  EXPECT_TRUE(h.api.requests.empty()) << "bad input must not reach the core";
}

}  // namespace
}  // namespace tailcut
