// The streaming generation sink end to end: the real HTTP server on a loopback port, the
// OpenAI generation routes, and a fake core that plays the sink on its own thread, as the
// generation step loop does. The events arrive as chunks while the request runs, a finished
// stream leaves the connection usable, and a client that leaves mid-stream cancels the request
// the core holds.
#include "server/generation_sink.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "server/openai_generation_api.h"
#include "tests/server/fake_generation_api.h"
#include "tests/server/raw_client.h"

namespace tailcut {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

class GenerationStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HttpServerOptions options;
    options.host = "127.0.0.1";
    options.port = 0;
    // Routed on the IO thread: a test shortcut (tailcut serve routes on the work pool).
    server_ = HttpServer::Create(
        options, [this](const HttpExchangePtr& ex) { h_.router.Dispatch(ex); }, nullptr);
    ASSERT_TRUE(server_->Start().ok());
  }
  void TearDown() override {
    JoinStepLoop();
    server_->Stop();
  }
  void JoinStepLoop() {
    std::vector<std::thread> threads;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      threads.swap(step_loop_);
    }
    for (auto& t : threads) t.join();
  }

  // The sink is played on a thread of its own; `play` gets the sink and the request's
  // cancellation flag.
  void PlayOnAThread(std::function<void(GenerationSinkPtr, CancellationFlag)> play) {
    h_.api.shared_script = [this, play](const GenerateRequest& r, GenerationSinkPtr sink) {
      std::lock_guard<std::mutex> lock(mutex_);
      step_loop_.emplace_back(play, std::move(sink), r.cancellation);
    };
  }

  GenerationHarness h_{AddOpenAiGenerationRoutes};
  std::unique_ptr<HttpServer> server_;
  std::mutex mutex_;
  std::vector<std::thread> step_loop_;  // Guarded by mutex_; joined before the server stops.
};

std::string ChatStream() {
  return Post(
      "/v1/chat/completions",
      R"({"model": "smol", "stream": true, "messages": [{"role": "user", "content": "hi"}]})",
      "Content-Type: application/json\r\n");
}

TEST_F(GenerationStreamTest, EventsArriveAsChunksWhileTheRequestRunsAndKeepAliveHolds) {
  // Each piece waits until the client has read the one before: it must be flushed at once.
  std::promise<void> first_read;
  auto first_read_done = first_read.get_future();
  PlayOnAThread([&first_read_done](GenerationSinkPtr sink, CancellationFlag) {
    sink->OnStart({"smol", "q8_0", 3, 50, "", 0, 0});
    sink->OnText({"Hel", 1, 0});
    first_read_done.wait();
    sink->OnText({"lo", 1, 0});
    GenerationEnd end;
    end.finish_reason = "length";
    end.usage = {3, 2, 0};
    sink->OnEnd(std::move(end));
  });
  RawClient c(server_->port());
  ASSERT_TRUE(c.Send(ChatStream()));
  auto head = c.ReadUntil("\r\n\r\n");
  ASSERT_TRUE(head);
  EXPECT_NE(head->find("HTTP/1.1 200"), std::string::npos) << *head;
  EXPECT_NE(head->find("Transfer-Encoding: chunked"), std::string::npos) << *head;
  EXPECT_NE(head->find("text/event-stream"), std::string::npos) << *head;
  EXPECT_NE(head->find("X-Tailcut-Variant: q8_0"), std::string::npos) << *head;
  auto role = c.ReadChunk();
  ASSERT_TRUE(role);
  EXPECT_EQ(json::parse(role->substr(6))["choices"][0]["delta"]["role"], "assistant");
  auto hel = c.ReadChunk();
  ASSERT_TRUE(hel);
  EXPECT_EQ(json::parse(hel->substr(6))["choices"][0]["delta"]["content"], "Hel");
  first_read.set_value();
  auto lo = c.ReadChunk();
  ASSERT_TRUE(lo);
  EXPECT_EQ(json::parse(lo->substr(6))["choices"][0]["delta"]["content"], "lo");
  auto finish = c.ReadChunk();
  ASSERT_TRUE(finish);
  EXPECT_EQ(json::parse(finish->substr(6))["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(c.ReadChunk(), "data: [DONE]\n\n");
  EXPECT_EQ(c.ReadChunk(), "");  // The last chunk: the body ended cleanly.
  // The connection serves the next request (the same script, now collected whole).
  ASSERT_TRUE(c.Send(Post("/v1/completions", R"({"prompt": "p"})")));
  auto next = c.Read();
  ASSERT_TRUE(next);
  EXPECT_EQ(next->status, 200u);
  EXPECT_EQ(json::parse(next->body)["choices"][0]["text"], "Hello");
}

TEST_F(GenerationStreamTest, AClientThatLeavesMidStreamCancelsTheRequestTheCoreHolds) {
  std::atomic<bool> saw_cancel{false};
  PlayOnAThread([&saw_cancel](GenerationSinkPtr sink, CancellationFlag cancelled) {
    sink->OnStart({"smol", "q8_0", 3, 0, "", 0, 0});
    sink->OnText({"one", 1, 0});
    // The step loop would check the flag every step; here: until it is set, or 10 s.
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!IsCancelled(cancelled) && std::chrono::steady_clock::now() < give_up) {
      sink->OnText({"x", 1, 0});
      std::this_thread::sleep_for(milliseconds(1));
    }
    saw_cancel = IsCancelled(cancelled);
    sink->OnEnd(Status::Cancelled("the client went away"));
  });
  {
    RawClient c(server_->port());
    ASSERT_TRUE(c.Send(ChatStream()));
    ASSERT_TRUE(c.ReadUntil("\"one\""));
  }  // Gone mid-stream.
  JoinStepLoop();
  EXPECT_TRUE(saw_cancel);
  // The stream's end is counted as the client's going away.
  EXPECT_NE(h_.metrics.Serialize().find("route=\"/v1/chat/completions\",model=\"smol\","
                                        "status=\"499\"} 1"),
            std::string::npos);
}

}  // namespace
}  // namespace tailcut
