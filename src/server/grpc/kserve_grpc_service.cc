#include "server/grpc/kserve_grpc_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "common/cancellation.h"
#include "server/generation_sink.h"
#include "server/grpc/grpc_status.h"
#include "server/grpc/kserve_grpc_tensors.h"
#include "server/http_errors.h"
#include "server/kserve_binary.h"
#include "server/kserve_generate_api.h"
#include "server/kserve_protocol_tensors.h"

namespace tailcut {
namespace {

constexpr std::string_view kRoutePrefix = "/inference.GRPCInferenceService/";

std::string_view Metadata(const grpc::CallbackServerContext& context, std::string_view key) {
  const auto& md = context.client_metadata();
  auto it = md.find(grpc::string_ref(key.data(), key.size()));
  if (it == md.end()) return {};
  return {it->second.data(), it->second.size()};
}

// The request's absolute deadline on `clock` from the call's gRPC deadline; 0 = none.
int64_t DeadlineMicros(const grpc::CallbackServerContext& context, const Clock& clock) {
  const auto deadline = context.deadline();
  const auto now = std::chrono::system_clock::now();
  // gRPC's "no deadline" is the far future; anything beyond a day is treated as none, like
  // X-Request-Timeout-Ms's ceiling.
  if (deadline > now + std::chrono::hours(24)) return 0;
  const int64_t left =
      std::chrono::duration_cast<std::chrono::microseconds>(deadline - now).count();
  // A deadline already passed still reaches the core, which answers DEADLINE_EXCEEDED.
  return clock.NowMicros() + std::max<int64_t>(left, 1);
}

// A request parameter's value, with its expected kind named in the error.
Result<std::optional<bool>> BoolParameter(
    const google::protobuf::Map<std::string, inference::InferParameter>& params,
    const std::string& key) {
  auto it = params.find(key);
  if (it == params.end()) return std::optional<bool>();
  if (it->second.parameter_choice_case() != inference::InferParameter::kBoolParam) {
    return Status::InvalidArgument("parameter '" + key + "' must be a bool_param");
  }
  return std::optional<bool>(it->second.bool_param());
}

Result<std::optional<std::string>> StringParameter(
    const google::protobuf::Map<std::string, inference::InferParameter>& params,
    const std::string& key) {
  auto it = params.find(key);
  if (it == params.end()) return std::optional<std::string>();
  if (it->second.parameter_choice_case() != inference::InferParameter::kStringParam) {
    return Status::InvalidArgument("parameter '" + key + "' must be a string_param");
  }
  return std::optional<std::string>(it->second.string_param());
}

// Triton's "timeout" request parameter: microseconds, int64 or uint64; 0 = none given.
Result<int64_t> TimeoutParameter(
    const google::protobuf::Map<std::string, inference::InferParameter>& params) {
  auto it = params.find("timeout");
  if (it == params.end()) return int64_t{0};
  const auto& p = it->second;
  if (p.parameter_choice_case() == inference::InferParameter::kInt64Param && p.int64_param() > 0) {
    return p.int64_param();
  }
  if (p.parameter_choice_case() == inference::InferParameter::kUint64Param &&
      p.uint64_param() > 0) {
    return static_cast<int64_t>(
        std::min<uint64_t>(p.uint64_param(), std::numeric_limits<int64_t>::max()));
  }
  return Status::InvalidArgument(
      "parameter 'timeout' must be a positive int64_param "
      "(microseconds)");
}

// An output's "classification" parameter (KServe's classification extension): how many
// classes; 0 = none asked. tritonclient sends it as int64_param.
Result<int32_t> ClassificationParameter(
    const inference::ModelInferRequest::InferRequestedOutputTensor& output) {
  auto it = output.parameters().find("classification");
  if (it == output.parameters().end()) return 0;
  const auto& p = it->second;
  int64_t k = 0;
  if (p.parameter_choice_case() == inference::InferParameter::kInt64Param) {
    k = p.int64_param();
  } else if (p.parameter_choice_case() == inference::InferParameter::kUint64Param) {
    k = static_cast<int64_t>(std::min<uint64_t>(p.uint64_param(), 1u << 30));
  } else {
    k = -1;
  }
  if (k < 1 || k > (1 << 30)) {
    return Status::InvalidArgument("output '" + output.name() +
                                   "': parameter 'classification' must be a positive "
                                   "int64_param (the number of classes)");
  }
  return static_cast<int32_t>(k);
}

// The request's parameters as the JSON object the generate extension reads (its own
// parameters are typed there), so every transport reads them one way.
nlohmann::json ParametersJson(
    const google::protobuf::Map<std::string, inference::InferParameter>& params) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [key, p] : params) {
    switch (p.parameter_choice_case()) {
      case inference::InferParameter::kBoolParam:
        out[key] = p.bool_param();
        break;
      case inference::InferParameter::kInt64Param:
        out[key] = p.int64_param();
        break;
      case inference::InferParameter::kStringParam:
        out[key] = p.string_param();
        break;
      case inference::InferParameter::kDoubleParam:
        out[key] = p.double_param();
        break;
      case inference::InferParameter::kUint64Param:
        out[key] = p.uint64_param();
        break;
      case inference::InferParameter::PARAMETER_CHOICE_NOT_SET:
        break;
    }
  }
  return out;
}

// The earlier of two deadlines, where 0 is none.
int64_t EarlierDeadline(int64_t a, int64_t b) {
  if (a == 0) return b;
  if (b == 0) return a;
  return std::min(a, b);
}

}  // namespace

// What RunInfer needs of a request, whichever way it came (a unary call, or one request on
// a stream): its metadata and arrival, its cancellation, and the one way it ends.
class KServeGrpcService::InferCall {
 public:
  virtual ~InferCall() = default;
  virtual const grpc::CallbackServerContext& context() const = 0;
  virtual int64_t received_micros() const = 0;
  virtual CancellationFlag cancellation() const = 0;
  // Ends the request with `status` (OK: its response is filled in). `model` labels the
  // metrics (a served model's name, or empty). Nothing may touch the call afterwards.
  virtual void Answer(const Status& status, const std::string& model,
                      StageTimings timings = {}) = 0;
};

void KServeGrpcService::Record(std::string_view route, const std::string& model,
                               const Status& status, int64_t received_micros, bool inference,
                               std::string_view traceparent, std::string_view incoming,
                               StageTimings& timings) {
  ApiContext::CallRecord record;
  record.route = route;
  record.method = "gRPC";
  record.model = model;
  record.status = status.ok() ? 200 : HttpStatusFor(status.code());
  record.received_micros = received_micros;
  record.inference = inference;
  record.traceparent = traceparent;
  record.incoming_traceparent = incoming;
  context_.RecordCall(record, timings);
}

// One unary call: its cancellation, arrival time and trace context; Answer() records it and
// finishes the reactor. gRPC deletes it through OnDone.
class KServeGrpcService::UnaryCall final : public grpc::ServerUnaryReactor, public InferCall {
 public:
  UnaryCall(KServeGrpcService& service, grpc::CallbackServerContext* context,
            std::string_view method, bool inference)
      : service_(service),
        context_(context),
        route_(std::string(kRoutePrefix) + std::string(method)),
        inference_(inference),
        received_micros_(service.context_.clock().NowMicros()),
        cancellation_(std::make_shared<Cancellation>()),
        traceparent_(TraceparentFor(Metadata(*context, "traceparent"))) {
    service_.in_flight_.fetch_add(1, std::memory_order_relaxed);
    service_.Hold();
  }

  const grpc::CallbackServerContext& context() const override { return *context_; }
  int64_t received_micros() const override { return received_micros_; }
  CancellationFlag cancellation() const override { return cancellation_; }

  void Answer(const Status& status, const std::string& model, StageTimings timings = {}) override {
    service_.Record(route_, model, status, received_micros_, inference_, traceparent_,
                    Metadata(*context_, "traceparent"), timings);
    context_->AddInitialMetadata("traceparent", traceparent_);
    context_->AddTrailingMetadata("server-timing", timings.ToServerTiming());
    KServeGrpcService& service = service_;  // Finish() may delete this reactor.
    Finish(ToGrpcStatus(status));
    service.LetGo();
  }

  void OnCancel() override { cancellation_->Cancel(); }
  void OnDone() override {
    service_.in_flight_.fetch_sub(1, std::memory_order_relaxed);
    delete this;
  }

 private:
  KServeGrpcService& service_;
  grpc::CallbackServerContext* const context_;
  const std::string route_;
  const bool inference_;
  const int64_t received_micros_;
  const std::shared_ptr<Cancellation> cancellation_;
  const std::string traceparent_;
};

// Triton's streaming extension: requests read one at a time, each run as a unary ModelInfer
// is (on the work pool, answered when its result comes), and each answer written as it
// completes. One write is outstanding at a time (gRPC's rule); the others queue. The stream
// finishes once the client has closed its side and every request read has been answered;
// a client that goes away cancels what it sent.
class KServeGrpcService::Stream final
    : public grpc::ServerBidiReactor<inference::ModelInferRequest,
                                     inference::ModelStreamInferResponse> {
 public:
  Stream(KServeGrpcService& service, grpc::CallbackServerContext* context)
      : service_(service),
        context_(context),
        cancellation_(std::make_shared<Cancellation>()),
        traceparent_(TraceparentFor(Metadata(*context, "traceparent"))) {
    service_.in_flight_.fetch_add(1, std::memory_order_relaxed);
    if (Status s = service_.auth_.Check(Metadata(*context, "authorization"),
                                        Authenticator::RouteClass::kInference);
        !s.ok()) {
      StageTimings none;
      service_.Record(kRoute, "", s, service_.context_.clock().NowMicros(), true, traceparent_,
                      Metadata(*context_, "traceparent"), none);
      Finish(ToGrpcStatus(s));
      return;
    }
    context_->AddInitialMetadata("traceparent", traceparent_);
    StartSendInitialMetadata();
    StartRead(&next_);
  }

  // Start*() and Finish() are called with no lock held: gRPC may run a reaction on the
  // calling thread, and the reaction takes the lock.
  void OnReadDone(bool ok) override {
    if (!ok) {  // The client closed its side (or went away).
      bool finish;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        reads_done_ = true;
        finish = ShouldFinishLocked();
      }
      if (finish) Finish(grpc::Status::OK);
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++unanswered_;
    }
    auto* request = new StreamedRequest(*this, std::move(next_));
    next_.Clear();
    StartRead(&next_);  // Reads the next request while this one runs.
    request->Dispatch();
  }

  void OnWriteDone(bool ok) override {
    const inference::ModelStreamInferResponse* next = nullptr;
    bool finish = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      writes_.pop_front();
      if (!ok) {
        broken_ = true;  // The client is gone: the rest of the answers go nowhere.
        writes_.clear();
      }
      if (!writes_.empty()) {
        next = &writes_.front();
      } else {
        writing_ = false;
        finish = ShouldFinishLocked();
      }
    }
    if (next) StartWrite(next);
    if (finish) Finish(grpc::Status::OK);
  }

  void OnCancel() override { cancellation_->Cancel(); }
  void OnDone() override {
    service_.in_flight_.fetch_sub(1, std::memory_order_relaxed);
    delete this;
  }

 private:
  static constexpr std::string_view kRoute = "/inference.GRPCInferenceService/ModelStreamInfer";

  // One request read from the stream, alive from its read until its answer is queued.
  class StreamedRequest final : public InferCall {
   public:
    StreamedRequest(Stream& stream, inference::ModelInferRequest request)
        : stream_(stream),
          request_(std::move(request)),
          received_micros_(stream.service_.context_.clock().NowMicros()),
          // A span of its own in the stream's trace: each request is a request.
          traceparent_(TraceparentFor(Metadata(*stream.context_, "traceparent"))) {
      stream_.service_.Hold();
    }

    void Dispatch() {
      KServeGrpcService& service = stream_.service_;
      const bool heavy = request_.ByteSizeLong() >= service.options_.heavy_request_bytes;
      WorkPool::Task task = [this] {
        stream_.service_.RunInfer(this, request_, answer_.mutable_infer_response());
      };
      if (!service.pool_.TrySubmit(heavy ? WorkPool::Lane::kHeavy : WorkPool::Lane::kLight, task)) {
        Answer(Status::Unavailable("server busy: too many requests are waiting for a work "
                                   "thread; retry shortly"),
               service.context_.ModelLabel(request_.model_name()));
      }
    }

    const grpc::CallbackServerContext& context() const override { return *stream_.context_; }
    int64_t received_micros() const override { return received_micros_; }
    CancellationFlag cancellation() const override { return stream_.cancellation_; }

    void Answer(const Status& status, const std::string& model,
                StageTimings timings = {}) override {
      stream_.service_.Record(kRoute, model, status, received_micros_, true, traceparent_,
                              Metadata(*stream_.context_, "traceparent"), timings);
      if (!status.ok()) {
        // Triton's convention: the error's text, and the request's id to match it by.
        answer_.Clear();
        answer_.set_error_message(status.message());
        answer_.mutable_infer_response()->set_id(request_.id());
        answer_.mutable_infer_response()->set_model_name(request_.model_name());
      }
      Stream& stream = stream_;
      KServeGrpcService& service = stream_.service_;  // The write may end the stream.
      inference::ModelStreamInferResponse answer = std::move(answer_);
      delete this;
      stream.Write(std::move(answer));
      service.LetGo();
    }

   private:
    Stream& stream_;
    const inference::ModelInferRequest request_;
    const int64_t received_micros_;
    const std::string traceparent_;
    inference::ModelStreamInferResponse answer_;
  };

  // Queues `answer` for writing (and starts the write if none is outstanding).
  void Write(inference::ModelStreamInferResponse answer) {
    const inference::ModelStreamInferResponse* start = nullptr;
    bool finish = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      --unanswered_;
      if (broken_) {
        finish = ShouldFinishLocked();
      } else {
        // A deque: the element being written stays where it is while others are queued.
        writes_.push_back(std::move(answer));
        if (!writing_) {
          writing_ = true;
          start = &writes_.front();
        }
      }
    }
    if (start) StartWrite(start);
    if (finish) Finish(grpc::Status::OK);
  }

  // Whether to finish now (once only): the client is done sending, and every request it sent
  // has been answered and written.
  bool ShouldFinishLocked() {
    if (finished_ || !reads_done_ || unanswered_ > 0 || writing_) return false;
    finished_ = true;
    return true;
  }

  KServeGrpcService& service_;
  grpc::CallbackServerContext* const context_;
  const std::shared_ptr<Cancellation> cancellation_;
  const std::string traceparent_;
  inference::ModelInferRequest next_;  // Being read; touched only by the read chain.
  std::mutex mutex_;
  std::deque<inference::ModelStreamInferResponse> writes_;  // Guarded by mutex_; front in flight.
  bool writing_ = false;                                    // Guarded by mutex_.
  bool reads_done_ = false;                                 // Guarded by mutex_.
  bool broken_ = false;                                     // Guarded by mutex_.
  bool finished_ = false;                                   // Guarded by mutex_.
  int64_t unanswered_ = 0;  // Requests read and not yet answered; guarded by mutex_.
};

KServeGrpcService::KServeGrpcService(ApiContext& context, Authenticator& auth, WorkPool& pool,
                                     const KServeGrpcServiceOptions& options)
    : context_(context), auth_(auth), pool_(pool), options_(options) {}

KServeGrpcService::~KServeGrpcService() {
  AwaitCallsLetGo();
}

void KServeGrpcService::AwaitCallsLetGo() {
  std::unique_lock<std::mutex> lock(holders_mutex_);
  // Every call is answered exactly once, so this ends; a call that never is would be a bug,
  // and destroying the service under it a use-after-free: say so and keep waiting.
  while (!no_holders_.wait_for(lock, std::chrono::seconds(5), [this] { return holders_ == 0; })) {
    spdlog::error("gRPC service: {} calls still unanswered at shutdown; waiting for them",
                  holders_);
  }
}

void KServeGrpcService::Hold() {
  std::lock_guard<std::mutex> lock(holders_mutex_);
  ++holders_;
}

void KServeGrpcService::LetGo() {
  // Notified under the lock: the destructor cannot return (and free the condition variable)
  // before this call is done with it.
  std::lock_guard<std::mutex> lock(holders_mutex_);
  if (--holders_ == 0) no_holders_.notify_all();
}

bool KServeGrpcService::Begin(grpc::CallbackServerContext* context, std::string_view method,
                              Authenticator::RouteClass route, bool inference, UnaryCall** call) {
  *call = new UnaryCall(*this, context, method, inference);
  if (Status s = auth_.Check(Metadata(*context, "authorization"), route); !s.ok()) {
    (*call)->Answer(s, "");
    return false;
  }
  return true;
}

// A handler returns its reactor even when it has answered already: gRPC runs OnDone (which
// deletes it) only after the handler has returned.

grpc::ServerUnaryReactor* KServeGrpcService::ServerLive(grpc::CallbackServerContext* context,
                                                        const inference::ServerLiveRequest*,
                                                        inference::ServerLiveResponse* response) {
  UnaryCall* call = nullptr;
  if (!Begin(context, "ServerLive", Authenticator::RouteClass::kHealth, false, &call)) return call;
  response->set_live(true);
  call->Answer(Status::Ok(), "");
  return call;
}

grpc::ServerUnaryReactor* KServeGrpcService::ServerReady(grpc::CallbackServerContext* context,
                                                         const inference::ServerReadyRequest*,
                                                         inference::ServerReadyResponse* response) {
  UnaryCall* call = nullptr;
  if (!Begin(context, "ServerReady", Authenticator::RouteClass::kHealth, false, &call)) return call;
  // Not an error when not ready: the answer says so (HTTP's 503 is for load balancers).
  response->set_ready(context_.api().Ready());
  call->Answer(Status::Ok(), "");
  return call;
}

grpc::ServerUnaryReactor* KServeGrpcService::ModelReady(grpc::CallbackServerContext* context,
                                                        const inference::ModelReadyRequest* request,
                                                        inference::ModelReadyResponse* response) {
  UnaryCall* call = nullptr;
  if (!Begin(context, "ModelReady", Authenticator::RouteClass::kHealth, false, &call)) return call;
  auto d = context_.api().DescribeModel(request->name());
  if (!d.ok()) {
    call->Answer(d.status(), "");
    return call;
  }
  response->set_ready(d->state == ModelState::kReady);
  call->Answer(Status::Ok(), d->name);
  return call;
}

grpc::ServerUnaryReactor* KServeGrpcService::ServerMetadata(
    grpc::CallbackServerContext* context, const inference::ServerMetadataRequest*,
    inference::ServerMetadataResponse* response) {
  UnaryCall* call = nullptr;
  if (!Begin(context, "ServerMetadata", Authenticator::RouteClass::kInference, false, &call)) {
    return call;
  }
  response->set_name("tailcut");
  response->set_version(TAILCUT_VERSION);
  call->Answer(Status::Ok(), "");
  return call;
}

namespace {

Status CheckVersion(const std::string& model, const std::string& version) {
  // One version of each model is served, and metadata lists it as "1".
  if (version.empty() || version == "1") return Status::Ok();
  return Status::NotFound("model '" + model + "' has no version '" + version +
                          "'; its one version is '1'");
}

}  // namespace

grpc::ServerUnaryReactor* KServeGrpcService::ModelMetadata(
    grpc::CallbackServerContext* context, const inference::ModelMetadataRequest* request,
    inference::ModelMetadataResponse* response) {
  UnaryCall* call = nullptr;
  if (!Begin(context, "ModelMetadata", Authenticator::RouteClass::kInference, false, &call)) {
    return call;
  }
  auto d = context_.api().DescribeModel(request->name());
  if (!d.ok()) {
    call->Answer(d.status(), "");
    return call;
  }
  if (Status s = CheckVersion(request->name(), request->version()); !s.ok()) {
    call->Answer(s, d->name);
    return call;
  }
  std::vector<ProtocolTensor> inputs, outputs;
  ProtocolTensors(*d, &inputs, &outputs);
  response->set_name(d->name);
  response->add_versions("1");
  response->set_platform(std::string(ProtocolPlatform(*d)));
  auto add = [](const ProtocolTensor& t, inference::ModelMetadataResponse::TensorMetadata* out) {
    out->set_name(t.name);
    out->set_datatype(t.datatype);
    for (int64_t dim : t.shape) out->add_shape(dim);
  };
  for (const auto& t : inputs) add(t, response->add_inputs());
  for (const auto& t : outputs) add(t, response->add_outputs());
  call->Answer(Status::Ok(), d->name);
  return call;
}

grpc::ServerUnaryReactor* KServeGrpcService::ModelInfer(grpc::CallbackServerContext* context,
                                                        const inference::ModelInferRequest* request,
                                                        inference::ModelInferResponse* response) {
  UnaryCall* call = nullptr;
  if (!Begin(context, "ModelInfer", Authenticator::RouteClass::kInference, true, &call)) {
    return call;
  }
  const bool heavy = request->ByteSizeLong() >= options_.heavy_request_bytes;
  WorkPool::Task task = [this, call, request, response] { RunInfer(call, *request, response); };
  if (!pool_.TrySubmit(heavy ? WorkPool::Lane::kHeavy : WorkPool::Lane::kLight, task)) {
    call->Answer(Status::Unavailable("server busy: too many requests are waiting for a work "
                                     "thread; retry shortly"),
                 context_.ModelLabel(request->model_name()));
  }
  return call;
}

grpc::ServerBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse>*
KServeGrpcService::ModelStreamInfer(grpc::CallbackServerContext* context) {
  return new Stream(*this, context);
}

void KServeGrpcService::RunInfer(InferCall* call, const inference::ModelInferRequest& request,
                                 inference::ModelInferResponse* response) {
  const int64_t parse_start = context_.clock().NowMicros();
  StageTimings timings;
  timings.parse_micros = parse_start - call->received_micros();
  auto fail = [&](const Status& s, const std::string& model) { call->Answer(s, model, timings); };
  auto d = context_.api().DescribeModel(request.model_name());
  if (!d.ok()) return fail(d.status(), "");
  const std::string model = d->name;
  if (Status s = CheckVersion(request.model_name(), request.model_version()); !s.ok()) {
    return fail(s, model);
  }
  if (request.inputs_size() == 0) {
    return fail(Status::InvalidArgument("the request has no inputs"), model);
  }
  auto raw = GrpcRawInputs(request);
  if (!raw.ok()) return fail(raw.status(), model);
  auto timeout = TimeoutParameter(request.parameters());
  if (!timeout.ok()) return fail(timeout.status(), model);
  const int64_t deadline = EarlierDeadline(
      DeadlineMicros(call->context(), context_.clock()),
      *timeout > 0 ? call->received_micros() +
                         std::min<int64_t>(*timeout, std::numeric_limits<int64_t>::max() / 2)
                   : 0);
  std::vector<std::string> outputs;
  std::vector<OutputClassification> classifications;
  for (const auto& o : request.outputs()) {
    if (o.name().empty()) return fail(Status::InvalidArgument("an output's name is empty"), model);
    outputs.push_back(o.name());
    auto k = ClassificationParameter(o);
    if (!k.ok()) return fail(k.status(), model);
    if (*k > 0) classifications.push_back({o.name(), *k});
  }
  response->set_model_name(model);
  response->set_model_version("1");
  response->set_id(request.id());

  if (d->kind == "generative") {
    // As over HTTP (kserve_api.cc): one BYTES input of one prompt, generate's parameters, the
    // whole answer as "text_output".
    if (request.inputs_size() != 1 || request.inputs(0).datatype() != "BYTES") {
      return fail(OneBytesInputError(*d), model);
    }
    if (Status s = CheckRequestedOutputs(*d, outputs); !s.ok()) return fail(s, model);
    auto texts = TextsFromGrpcInput(request.inputs(0), (*raw)[0]);
    if (!texts.ok()) return fail(texts.status(), model);
    if (texts->size() != 1) {
      return fail(Status::InvalidArgument("a generative model takes one prompt per request, "
                                          "got " +
                                          std::to_string(texts->size())),
                  model);
    }
    GenerateRequest req;
    req.model = model;
    req.prompt = std::move((*texts)[0]);
    if (Status s = ReadKServeGenerateParameters(ParametersJson(request.parameters()), false, &req);
        !s.ok()) {
      return fail(s, model);
    }
    ApiContext::ApplyCacheControl(Metadata(call->context(), "cache-control"), &req);
    req.received_micros = call->received_micros();
    req.deadline_micros = deadline;
    req.cancellation = call->cancellation();
    const int64_t parse_micros = context_.clock().NowMicros() - call->received_micros();
    req.timings.parse_micros = parse_micros;
    auto sink = std::make_shared<CollectingGenerationSink>(
        context_, false, parse_micros, [this, call, response, model](Result<GeneratedText> r) {
          if (!r.ok()) return call->Answer(r.status(), model);
          const int64_t start = context_.clock().NowMicros();
          auto* out = response->add_outputs();
          out->set_name("text_output");
          out->set_datatype("BYTES");
          out->add_shape(1);
          *response->add_raw_output_contents() = EncodeKServeBinaryString(r->text);
          (*response->mutable_parameters())["variant"].set_string_param(r->start.variant);
          StageTimings t = r->timings;
          t.serialize_micros = context_.clock().NowMicros() - start;
          call->Answer(Status::Ok(), r->start.model, t);
        });
    context_.Generate(std::move(req), std::move(sink));
    return;
  }

  if (d->kind == "text-embedding") {
    if (request.inputs_size() != 1 || request.inputs(0).datatype() != "BYTES") {
      return fail(OneBytesInputError(*d), model);
    }
    if (Status s = CheckRequestedOutputs(*d, outputs); !s.ok()) return fail(s, model);
    auto texts = TextsFromGrpcInput(request.inputs(0), (*raw)[0]);
    if (!texts.ok()) return fail(texts.status(), model);
    EmbedRequest req;
    req.model = model;
    req.inputs = std::move(texts).value();
    auto normalize = BoolParameter(request.parameters(), "normalize");
    auto truncate = BoolParameter(request.parameters(), "truncate");
    auto precision = StringParameter(request.parameters(), "precision");
    for (const Status& s : {normalize.status(), truncate.status(), precision.status()}) {
      if (!s.ok()) return fail(s, model);
    }
    req.normalize = *normalize;
    req.truncate = truncate->value_or(true);
    req.precision = precision->value_or("");
    ApiContext::ApplyCacheControl(Metadata(call->context(), "cache-control"), &req);
    req.received_micros = call->received_micros();
    req.deadline_micros = deadline;
    req.cancellation = call->cancellation();
    timings.parse_micros = context_.clock().NowMicros() - call->received_micros();
    req.timings = timings;
    context_.Embed(std::move(req), [this, call, response, model](Result<EmbedResult> r) {
      if (!r.ok()) return call->Answer(r.status(), model);
      const int64_t start = context_.clock().NowMicros();
      StageTimings t = r->timings;
      if (Status s = AddGrpcOutput(EmbeddingTensor(*r), response); !s.ok())
        return call->Answer(s, r->model, t);
      (*response->mutable_parameters())["variant"].set_string_param(ServedVariants(*r));
      t.serialize_micros = context_.clock().NowMicros() - start;
      call->Answer(Status::Ok(), r->model, t);
    });
    return;
  }

  TensorRequest req;
  req.model = model;
  for (int i = 0; i < request.inputs_size(); ++i) {
    auto t = TensorFromGrpcInput(request.inputs(i), static_cast<size_t>(i),
                                 (*raw)[static_cast<size_t>(i)]);
    if (!t.ok()) return fail(t.status(), model);
    req.inputs.push_back(std::move(t).value());
  }
  req.outputs = std::move(outputs);
  req.classifications = std::move(classifications);
  auto precision = StringParameter(request.parameters(), "precision");
  if (!precision.ok()) return fail(precision.status(), model);
  req.precision = precision->value_or("");
  req.received_micros = call->received_micros();
  req.deadline_micros = deadline;
  req.cancellation = call->cancellation();
  req.timings.parse_micros = context_.clock().NowMicros() - call->received_micros();
  context_.Infer(std::move(req), [this, call, response, model](Result<TensorResult> r) {
    if (!r.ok()) return call->Answer(r.status(), model);
    const int64_t start = context_.clock().NowMicros();
    StageTimings t = r->timings;
    for (const Tensor& out : r->outputs) {
      if (Status s = AddGrpcOutput(out, response); !s.ok()) return call->Answer(s, r->model, t);
    }
    (*response->mutable_parameters())["variant"].set_string_param(r->variant);
    t.serialize_micros = context_.clock().NowMicros() - start;
    call->Answer(Status::Ok(), r->model, t);
  });
}

}  // namespace tailcut
