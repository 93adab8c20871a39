#include "server/kserve_generate_api.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/sse_writer.h"
#include "tests/server/fake_generation_api.h"

namespace tailcut {
namespace {

using nlohmann::json;

class KServeGenerateTest : public ::testing::Test {
 protected:
  GenerationHarness h{AddKServeGenerateRoutes};
};

TEST_F(KServeGenerateTest, GenerateAnswersTritonsResponseObject) {
  auto ex = h.Post("/v2/models/smol/generate", R"({"text_input": "Say hi",
      "parameters": {"max_tokens": 3, "temperature": 0, "stream": false, "stop": "x",
                     "exclude_input_in_output": true}})");
  ASSERT_EQ(ex->response()->status, 200u) << ex->response()->body;
  const GenerateRequest& r = h.api.requests.at(0);
  EXPECT_EQ(r.model, "smol");
  EXPECT_FALSE(r.chat);
  EXPECT_EQ(r.prompt, "Say hi");
  EXPECT_EQ(r.max_tokens, 3);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.0f);
  EXPECT_EQ(r.stop, std::vector<std::string>{"x"});
  EXPECT_EQ(json::parse(ex->response()->body),
            json::parse(R"({"model_name": "smol", "model_version": "1", "text_output": "Hello"})"));
  EXPECT_NE(ex->response_header("Server-Timing").find("decode;dur="), std::string::npos);
}

TEST_F(KServeGenerateTest, ParametersPrecisionPinsTheVariantAndTheHeaderNamesIt) {
  auto ex = h.Post("/v2/models/smol/generate",
                   R"({"text_input": "Say hi", "parameters": {"precision": "q8_0"}})");
  ASSERT_EQ(ex->response()->status, 200u) << ex->response()->body;
  EXPECT_EQ(h.api.requests.at(0).precision, "q8_0");
  EXPECT_EQ(ex->response_header("X-Tailcut-Variant"), "q8_0");
  ex = h.Post("/v2/models/smol/generate",
              R"({"text_input": "Say hi", "parameters": {"precision": ["q8_0"]}})");
  EXPECT_EQ(ex->response()->status, 400u);
  EXPECT_NE(ex->response()->body.find("parameters.precision"), std::string::npos);
}

TEST_F(KServeGenerateTest, GenerateStreamSendsOneEventPerPieceAndEnds) {
  auto ex = h.Post("/v2/models/smol/generate_stream",
                   R"({"text_input": "Say hi", "parameters": {"stream": true}})");
  ASSERT_TRUE(ex->stream());
  EXPECT_EQ(ex->response()->content_type, "text/event-stream; charset=utf-8");
  EXPECT_TRUE(ex->stream()->finished());
  const auto events = SseData(ex->stream()->body());
  ASSERT_EQ(events.size(), 2u) << ex->stream()->body();  // No [DONE]: Triton has none.
  EXPECT_EQ(json::parse(events[0]),
            json::parse(R"({"model_name": "smol", "model_version": "1", "text_output": "Hel"})"));
  EXPECT_EQ(json::parse(events[1])["text_output"], "lo");
}

TEST_F(KServeGenerateTest, ErrorsAreKServeObjectsBeforeTheStreamAndEventsAfter) {
  h.api.script = [](const GenerateRequest&, GenerationSink& sink) {
    sink.OnEnd(Status::NotFound("model 'nope' is not served"));
  };
  auto ex = h.Post("/v2/models/nope/generate_stream", R"({"text_input": "x"})");
  EXPECT_FALSE(ex->stream());
  EXPECT_EQ(ex->response()->status, 404u);
  EXPECT_EQ(json::parse(ex->response()->body)["error"], "model 'nope' is not served");

  h.api.script = [](const GenerateRequest&, GenerationSink& sink) {
    sink.OnStart({"smol", "q8_0", 1, 0, "", 0, 0});
    sink.OnText({"a", 1, 0});
    sink.OnEnd(Status::Internal("decode failed"));
  };
  ex = h.Post("/v2/models/smol/generate_stream", R"({"text_input": "x"})");
  ASSERT_TRUE(ex->stream());
  const auto events = SseData(ex->stream()->body());
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(json::parse(events[1])["error"], "decode failed");
}

TEST_F(KServeGenerateTest, BadInputIsA400NamingTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"text_input": )", "not valid JSON"},
      {R"({})", "'text_input'"},
      {R"({"text_input": 5})", "'text_input'"},
      {R"({"text_input": "x", "parameters": 5})", "'parameters'"},
      {R"({"text_input": "x", "parameters": {"max_tokens": 0}})", "'parameters.max_tokens'"},
      {R"({"text_input": "x", "parameters": {"temperature": -1}})", "'parameters.temperature'"},
      {R"({"text_input": "x", "parameters": {"stop": ["a", "b", "c", "d", "e"]}})",
       "'parameters.stop'"},
      {R"({"text_input": "x", "parameters": {"stream": true}})", "generate_stream"},
      {R"({"text_input": "x", "parameters": {"stream": "no"}})", "'parameters.stream'"},
  };
  for (const auto& [body, names] : cases) {
    auto ex = h.Post("/v2/models/smol/generate", body);
    ASSERT_EQ(ex->response()->status, 400u) << body;
    const std::string message = json::parse(ex->response()->body)["error"];
    EXPECT_NE(message.find(names), std::string::npos) << body << " -> " << message;
  }
  EXPECT_TRUE(h.api.requests.empty());
}

TEST(SseWriterTest, EventsAreDataLinesEndedByABlankLine) {
  EXPECT_EQ(SseEvent(R"({"a":1})"), "data: {\"a\":1}\n\n");
  EXPECT_EQ(SseEvent("one\ntwo\r\nthree"), "data: one\ndata: two\ndata: three\n\n");
  EXPECT_EQ(SseEvent(""), "data: \n\n");
  EXPECT_EQ(kSseDone, "data: [DONE]\n\n");
  auto stream = std::make_shared<FakeStream>();
  SseWriter writer(stream);
  EXPECT_TRUE(writer.Send("x"));
  writer.End(true);
  EXPECT_EQ(stream->pieces(), (std::vector<std::string>{"data: x\n\n", "data: [DONE]\n\n"}));
  EXPECT_TRUE(stream->finished());
  EXPECT_FALSE(writer.Send("late"));
}

}  // namespace
}  // namespace tailcut
