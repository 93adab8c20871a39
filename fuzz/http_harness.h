// HttpHarness: the server's request path without sockets, for the libFuzzer targets.
//
// Bytes go through Beast's request parser with the limits `tailcut serve` uses
// (HttpServerOptions' defaults: header and body sizes), then, for each request that parses,
// through the serve command's auth check (API keys required exactly when the request carries
// an Authorization header) and the real Router built by AddAllRoutes(), so the
// JSON parsing, validation and response formatting of every route run as in production.
// Behind the routes sits FakeInferenceApi instead of the inference service: it answers at
// once, on the calling thread, with deterministic fake embeddings or tensors, or with an error
// chosen from the request, so every success and error path of the front-ends is reachable
// without a model.
//
// Every response is checked: exactly one per request, a valid HTTP status, no CR/LF in any
// header (client input must never split a response), and a JSON body that parses whenever
// the content type says JSON. A violation aborts, which libFuzzer reports as a crash.
//
// Thread-safety: none; a fuzz target is single-threaded and builds one harness.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "fuzz/fuzz_check.h"
#include "server/http_server.h"

namespace tailcut::fuzz {

class HttpHarness {
 public:
  HttpHarness();
  ~HttpHarness();

  // Parses `bytes` as a keep-alive connection's worth of requests (at most a few pipelined
  // ones) and dispatches each as the server would. Returns the number of requests that
  // reached the router.
  int ServeBytes(std::string_view bytes);

  // Dispatches one already-built request (the JSON targets: a fixed route, the input as body).
  void ServeRequest(HttpRequest request);

  // Whether the fake service reports itself ready (/health, /v2/health/ready).
  void set_ready(bool ready);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Names the fake service serves: a text-embedding model (also "default"), a tensor model that
// echoes its inputs, and a model whose load failed.
inline constexpr std::string_view kFakeTextModel = "all-MiniLM-L6-v2";
inline constexpr std::string_view kFakeTensorModel = "echo";
inline constexpr std::string_view kFakeFailedModel = "broken";

}  // namespace tailcut::fuzz
