// KServeGrpcService: the KServe v2 gRPC protocol (inference.GRPCInferenceService) over the
// same core API, limits and accounting as the HTTP front-ends: translate the message, call
// InferenceApi through the ApiContext, translate the result back.
//   - Inference calls (ModelInfer) are handed to the work pool, as HTTP requests are
//     (RequestDispatcher): gRPC's threads only take calls in and send answers. A full pool
//     answers UNAVAILABLE at once. Health and metadata calls are answered in place: they read
//     the model registry and format a few fields.
//   - `authorization: Bearer <key>` metadata is checked by the same Authenticator (health
//     calls are public when health routes are); the gRPC deadline becomes the request's
//     deadline (Triton's "timeout" parameter, in microseconds, may shorten it); a client
//     that cancels cancels the request; `cache-control` metadata acts as the HTTP header does.
//   - Every call is recorded in tailcut_requests_total and the stage histograms under the
//     route "/inference.GRPCInferenceService/<Method>" (each request of a ModelStreamInfer
//     stream counts as one)
//   - A generative model's infer (text_input -> text_output) answers whole, on ModelInfer and
//     on a stream alike: one response per request, not Triton's decoupled token stream (that
//     is HTTP's generate_stream)., with the HTTP status of the same
//     outcome; `traceparent` is continued in the initial metadata and the stages are sent in
//     trailing metadata `server-timing`, as the HTTP answers' headers.
//
// Lifetime: the context, authenticator and pool must outlive the gRPC server serving this
// service; a call's reactor lives until gRPC reports it done, and every reactor is finished
// exactly once (by the core API's callback, which always runs). A call holds the service from
// its start until its answer is handed over (Answer's last step), and the destructor waits
// for every call to let go: an infer's completion runs on the work pool and reads the
// service up to that point, possibly after gRPC's Shutdown() has returned, and nothing in
// gRPC orders that completion before the service's destruction.
//
// Thread-safety: gRPC calls the methods from its threads, concurrently.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>

#include "common/work_pool.h"
#include "server/api_context.h"
#include "server/auth.h"
#include "server/grpc/grpc_service.grpc.pb.h"

namespace tailcut {

struct KServeGrpcServiceOptions {
  // Inference calls whose message is at least this many bytes run on the work pool's heavy
  // lane, as HTTP bodies of that size do (RequestDispatcherOptions::heavy_body_bytes).
  size_t heavy_request_bytes = 64 * 1024;
};

class KServeGrpcService final : public inference::GRPCInferenceService::CallbackService {
 public:
  KServeGrpcService(ApiContext& context, Authenticator& auth, WorkPool& pool,
                    const KServeGrpcServiceOptions& options);
  // Waits until no call holds the service (see Lifetime above).
  ~KServeGrpcService() override;

  // Returns once every call taken has been answered and its answer handed to gRPC (the
  // gRPC server that serves this service must have been shut down: no new calls). The
  // server's owner calls it before destroying the grpc::Server, whose objects a completion
  // is still reading inside Finish() when gRPC already counts the call as done.
  void AwaitCallsLetGo();

  // Calls taken and not yet done (their reactor not yet released by gRPC).
  int64_t in_flight() const { return in_flight_.load(std::memory_order_relaxed); }

  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* context,
                                       const inference::ServerLiveRequest* request,
                                       inference::ServerLiveResponse* response) override;
  grpc::ServerUnaryReactor* ServerReady(grpc::CallbackServerContext* context,
                                        const inference::ServerReadyRequest* request,
                                        inference::ServerReadyResponse* response) override;
  grpc::ServerUnaryReactor* ModelReady(grpc::CallbackServerContext* context,
                                       const inference::ModelReadyRequest* request,
                                       inference::ModelReadyResponse* response) override;
  grpc::ServerUnaryReactor* ServerMetadata(grpc::CallbackServerContext* context,
                                           const inference::ServerMetadataRequest* request,
                                           inference::ServerMetadataResponse* response) override;
  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* context,
                                          const inference::ModelMetadataRequest* request,
                                          inference::ModelMetadataResponse* response) override;
  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* context,
                                       const inference::ModelInferRequest* request,
                                       inference::ModelInferResponse* response) override;

  grpc::ServerBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse>*
  ModelStreamInfer(grpc::CallbackServerContext* context) override;

  // (kserve_grpc_service.cc) What RunInfer answers, a unary call's reactor, and a stream's.
  class InferCall;
  class UnaryCall;
  class Stream;

 private:
  // Starts a call (*call, the reactor to return); false when the authenticator refused it,
  // which *call has then answered.
  bool Begin(grpc::CallbackServerContext* context, std::string_view method,
             Authenticator::RouteClass route, bool inference, UnaryCall** call);
  // Records one answered request (ApiContext::RecordCall); fills in `timings.total_micros`.
  // `traceparent`: the answer's; `incoming`: the caller's metadata, for the trace's parent.
  void Record(std::string_view route, const std::string& model, const Status& status,
              int64_t received_micros, bool inference, std::string_view traceparent,
              std::string_view incoming, StageTimings& timings);
  // On the work pool: translates `request`, calls the core API, answers `call`.
  void RunInfer(InferCall* call, const inference::ModelInferRequest& request,
                inference::ModelInferResponse* response);
  // A call takes the service when it starts and lets go as the last thing its answer does;
  // the pair is a mutex and a condition variable (not an atomic) so that the destructor's
  // wait is ordered after everything a completion did, for TSan too.
  void Hold();
  void LetGo();

  std::mutex holders_mutex_;
  std::condition_variable no_holders_;
  int64_t holders_ = 0;  // Guarded by holders_mutex_.

  ApiContext& context_;
  Authenticator& auth_;
  WorkPool& pool_;
  const KServeGrpcServiceOptions options_;
  std::atomic<int64_t> in_flight_{0};
};

}  // namespace tailcut
