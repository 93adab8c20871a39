#include "fuzz/http_harness.h"

#include <boost/asio/buffer.hpp>
#include <boost/beast/http.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "core/inference_api.h"
#include "obs/metrics.h"
#include "server/api_context.h"
#include "server/auth.h"
#include "server/router.h"
#include "server/server_routes.h"

namespace tailcut::fuzz {

namespace {

namespace bhttp = boost::beast::http;

// FNV-1a: a cheap, stable hash for deriving the fake service's choices from the request.
uint64_t Hash(std::string_view s, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// One error in a few, chosen by the request, so the front-ends' error formatting (429 with
// Retry-After, 503, 504, 500) runs as often as their success formatting.
Status FakeFailure(uint64_t h) {
  switch (h % 19) {
    case 0:
      return Status::ResourceExhausted("queue full: 512 requests waiting");
    case 1:
      return Status::DeadlineExceeded("the request's deadline passed in the queue");
    case 2:
      return Status::Unavailable("the server is shutting down");
    case 3:
      return Status::Internal("onnxruntime: fake failure");
    default:
      return Status::Ok();
  }
}

// InferenceApi without a model: answers at once, deterministically.
class FakeInferenceApi final : public InferenceApi {
 public:
  static constexpr int kDimensions = 16;

  void Embed(EmbedRequest request, EmbedCallback done) override {
    if (request.model != "default" && request.model != kFakeTextModel) {
      if (request.model == kFakeTensorModel) {
        return done(
            Status::InvalidArgument("model 'echo' is a tensor model; use the KServe "
                                    "infer route"));
      }
      if (request.model == kFakeFailedModel) {
        return done(Status::Unavailable("model 'broken' failed to load: fake"));
      }
      return done(Status::NotFound("model '" + request.model + "' does not exist"));
    }
    if (!request.precision.empty() && request.precision != "fp32" && request.precision != "int8") {
      return done(Status::NotFound("model '" + std::string(kFakeTextModel) + "' has no variant '" +
                                   request.precision + "'"));
    }
    uint64_t h = Hash(request.precision);
    for (const auto& text : request.inputs) {
      h = Hash(text, h);
      if (!request.truncate && text.size() > 512) {
        return done(Status::PayloadTooLarge("input is " + std::to_string(text.size()) +
                                            " tokens long, more than the limit of 256 tokens"));
      }
    }
    if (Status s = FakeFailure(h); !s.ok()) return done(s);
    EmbedResult r;
    r.model = std::string(kFakeTextModel);
    r.variant = request.precision.empty() ? "fp32" : request.precision;
    r.dimensions = kDimensions;
    r.embeddings.reserve(request.inputs.size() * kDimensions);
    for (const auto& text : request.inputs) {
      uint64_t x = Hash(text);
      for (int d = 0; d < kDimensions; ++d) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        float v = static_cast<float>(static_cast<int32_t>(x >> 32)) / 2147483648.0f;
        // A broken model's NaN and Inf: the formatters must still write valid JSON.
        if ((x & 0x3ff) == 0) v = std::nanf("");
        if ((x & 0x3ff) == 1) v = INFINITY;
        r.embeddings.push_back(v);
      }
      r.token_counts.push_back(static_cast<int32_t>(2 + std::min<size_t>(text.size() / 3, 254)));
    }
    r.cache_hits = static_cast<int64_t>((h >> 8) % (request.inputs.size() + 1));
    r.timings = request.timings;
    r.timings.tokenize_micros = 3;
    r.timings.infer_micros = 500;
    done(std::move(r));
  }

  void Infer(TensorRequest request, TensorCallback done) override {
    if (request.model != kFakeTensorModel) {
      return done(Status::InvalidArgument("model '" + request.model + "' takes no tensors"));
    }
    uint64_t h = 0;
    for (const auto& t : request.inputs) {
      h = Hash(t.name, h);
      h = Hash(std::string_view(reinterpret_cast<const char*>(t.data.data()), t.data.size()), h);
    }
    if (Status s = FakeFailure(h); !s.ok()) return done(s);
    TensorResult r;
    r.model = std::string(kFakeTensorModel);
    r.version = "1";
    r.timings = request.timings;
    // Echo: every input comes back as an output, so every datatype's formatter runs.
    if (request.outputs.empty()) {
      r.outputs = std::move(request.inputs);
    } else {
      for (const auto& name : request.outputs) {
        auto it = std::find_if(request.inputs.begin(), request.inputs.end(),
                               [&](const Tensor& t) { return t.name == name; });
        if (it == request.inputs.end()) {
          return done(Status::InvalidArgument("model 'echo' has no output '" + name + "'"));
        }
        r.outputs.push_back(*it);
      }
    }
    done(std::move(r));
  }

  void Generate(GenerateRequest request, GenerationSinkPtr sink) override {
    (void)request;
    sink->OnEnd(Status::FailedPrecondition("the fuzz harness does not generate"));
  }

  std::vector<ModelDescription> ListModels() const override {
    return {*DescribeModel(std::string(kFakeTextModel)),
            *DescribeModel(std::string(kFakeTensorModel)),
            *DescribeModel(std::string(kFakeFailedModel))};
  }

  Result<ModelDescription> DescribeModel(const std::string& name) const override {
    ModelDescription d;
    d.state = ModelState::kReady;
    if (name == "default" || name == kFakeTextModel) {
      d.name = std::string(kFakeTextModel);
      d.kind = "text-embedding";
      d.version = "0123456789abcdef";
      d.dimensions = kDimensions;
      d.max_sequence_length = 256;
      d.max_batch_size = 64;
      d.inputs = {{"input_ids", DataType::kInt64, {-1, -1}},
                  {"attention_mask", DataType::kInt64, {-1, -1}}};
      d.outputs = {{"sentence_embedding", DataType::kFp32, {-1, kDimensions}}};
      d.variants = {"fp32", "int8"};
      VariantDescription fp32;
      fp32.name = fp32.precision = "fp32";
      fp32.loaded = fp32.batch_invariant = fp32.interchangeable = true;
      fp32.file_digest = "0123";
      fp32.fidelity_min_cosine = fp32.fidelity_recall_at_10 = 1.0;
      VariantDescription int8;
      int8.name = int8.precision = "int8";
      int8.error = "x";
      int8.not_interchangeable_reason = "variant 'int8' is not batch-invariant";
      d.variant_details = {fp32, int8};
      d.active_variant = d.default_variant = "fp32";
      d.precision_controller = "off: no fast variant is interchangeable";
      d.precision_policy = "slo";
    } else if (name == kFakeTensorModel) {
      d.name = std::string(kFakeTensorModel);
      d.kind = "tensor";
      d.inputs = {{"x", DataType::kFp32, {-1, 4}}};
      d.outputs = {{"x", DataType::kFp32, {-1, 4}}};
      d.max_batch_size = 8;
    } else if (name == kFakeFailedModel) {
      d.name = std::string(kFakeFailedModel);
      d.kind = "tensor";
      d.state = ModelState::kFailed;
      d.error = "cannot load model.onnx: fake";
    } else {
      return Status::NotFound("model '" + name + "' does not exist");
    }
    return d;
  }

  std::string default_model() const override { return std::string(kFakeTextModel); }
  bool Ready() const override { return ready; }

  bool ready = true;
};

// An exchange that records its response for the checks instead of writing it to a socket.
class FuzzExchange final : public HttpExchange {
 public:
  explicit FuzzExchange(HttpRequest request)
      : request_(std::move(request)), received_(SystemClock::Get().NowMicros()) {}

  const HttpRequest& request() const override { return request_; }
  std::string TakeBody() override { return std::exchange(request_.body(), std::string()); }
  void Respond(HttpResponse response) override {
    if (responses_++ == 0) response_ = std::move(response);
  }
  HttpStreamPtr StartStream(HttpResponse head) override {
    // A streamed answer counts as the response; its pieces are dropped.
    class NullStream final : public HttpStream {
     public:
      bool Write(std::string) override { return !ended_; }
      void Finish() override { ended_ = true; }
      void Abort() override { ended_ = true; }
      bool closed() const override { return ended_; }

     private:
      bool ended_ = false;
    };
    if (responses_++ != 0) return nullptr;
    response_ = std::move(head);
    return std::make_shared<NullStream>();
  }
  int64_t received_micros() const override { return received_; }
  std::string_view remote_address() const override { return "127.0.0.1:1"; }
  CancellationFlag cancellation() const override { return nullptr; }

  int responses() const { return responses_; }
  const HttpResponse& response() const { return response_; }

 private:
  HttpRequest request_;
  int64_t received_;
  int responses_ = 0;
  HttpResponse response_;
};

bool HasLineBreak(std::string_view s) {
  return s.find_first_of("\r\n") != std::string_view::npos;
}

void CheckResponse(const FuzzExchange& exchange) {
  Check(exchange.responses() == 1, "a request must get exactly one response");
  const HttpResponse& r = exchange.response();
  Check(r.status >= 100 && r.status <= 599, "the HTTP status must be 1xx-5xx");
  Check(!HasLineBreak(r.content_type), "CR/LF in the content type");
  for (const auto& [name, value] : r.headers) {
    Check(!name.empty() && !HasLineBreak(name), "empty header name or CR/LF in it");
    Check(!HasLineBreak(value), "CR/LF in a header value (response splitting)");
  }
  if (r.content_type.rfind("application/json", 0) == 0) {
    // accept() also rejects invalid UTF-8 inside strings.
    Check(nlohmann::json::accept(r.body), "a JSON response body does not parse");
  }
}

}  // namespace

struct HttpHarness::State {
  FakeInferenceApi api;
  MetricsRegistry metrics;
  ApiContext context{api, metrics, ApiContextOptions{}};
  Router router;
  // Two configurations of `tailcut serve`: open inference routes (no API keys), and API keys
  // required (one rate-limited key). Requests with an Authorization header meet the second,
  // so the key checks run without every other request ending in a 401 before its handler.
  std::unique_ptr<Authenticator> open_auth;
  std::unique_ptr<Authenticator> keyed_auth;
  // The limits `tailcut serve` starts with.
  HttpServerOptions options;
};

HttpHarness::HttpHarness() : state_(std::make_unique<State>()) {
  AddAllRoutes(state_->router, state_->context, TeiOptions{});
  // Admin routes are always behind a key. The admin routes themselves need the real
  // service, so /admin/... ends in a 404 once authenticated.
  AuthOptions open;
  open.admin_keys = "fuzz-admin-key";
  AuthOptions keyed = open;
  keyed.api_keys = "fuzz-api-key, fuzz-other-key";
  keyed.rate_limit_per_s = 1000;
  keyed.public_metrics = false;
  auto open_auth = Authenticator::Create(open);
  auto keyed_auth = Authenticator::Create(keyed);
  Check(open_auth.ok() && keyed_auth.ok(), "cannot create the authenticators");
  state_->open_auth = std::move(open_auth).value();
  state_->keyed_auth = std::move(keyed_auth).value();
}

HttpHarness::~HttpHarness() = default;

void HttpHarness::set_ready(bool ready) {
  state_->api.ready = ready;
}

void HttpHarness::ServeRequest(HttpRequest request) {
  auto exchange = std::make_shared<FuzzExchange>(std::move(request));
  const HttpExchangePtr ptr = exchange;
  // The handler of src/cli/serve_command.cc: auth, then the router.
  const auto route = Authenticator::Classify(ptr->path());
  Authenticator& auth =
      ptr->header("Authorization").empty() ? *state_->open_auth : *state_->keyed_auth;
  if (Status s = auth.Check(*ptr, route); !s.ok()) {
    state_->context.FinishError(ptr, "auth", "", s, ErrorStyle::kOpenAi);
  } else {
    state_->router.Dispatch(ptr);
  }
  // The fake service answers on this thread, so every response has been given by now.
  CheckResponse(*exchange);
}

int HttpHarness::ServeBytes(std::string_view bytes) {
  // A few pipelined requests on one keep-alive connection exercise the parser's handling of
  // the bytes that follow a message, without letting one input run for long.
  constexpr int kMaxRequests = 4;
  int dispatched = 0;
  size_t offset = 0;
  for (int i = 0; i < kMaxRequests && offset < bytes.size(); ++i) {
    bhttp::request_parser<bhttp::string_body> parser;
    parser.header_limit(static_cast<std::uint32_t>(state_->options.max_header_bytes));
    parser.body_limit(state_->options.max_body_bytes);
    boost::beast::error_code ec;
    // All the bytes left are what the socket has delivered: Beast consumes what it can and
    // asks for more (need_more) only when the rest is incomplete, which here means EOF.
    while (!parser.is_done()) {
      const size_t used =
          parser.put(boost::asio::const_buffer(bytes.data() + offset, bytes.size() - offset), ec);
      offset += used;
      if (ec == bhttp::error::need_more) ec = {};
      if (ec) break;
      if (used == 0) {  // No progress: the connection ends here.
        parser.put_eof(ec);
        break;
      }
    }
    // The server answers these itself (431, 413, 400) or closes; no handler runs.
    if (ec || !parser.is_done()) break;
    HttpRequest request = parser.release();
    const bool keep_alive = request.keep_alive();
    ServeRequest(std::move(request));
    ++dispatched;
    if (!keep_alive) break;
  }
  return dispatched;
}

}  // namespace tailcut::fuzz
