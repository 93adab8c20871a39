#include "server/grpc/kserve_grpc_server.h"

#include <grpcpp/grpcpp.h>

#include <limits>
#include <mutex>

#include "server/grpc/kserve_grpc_service.h"

namespace tailcut {

struct KServeGrpcServer::Impl {
  Impl(ApiContext& context, Authenticator& auth, WorkPool& pool,
       const KServeGrpcServiceOptions& options)
      : service(context, auth, pool, options) {}
  KServeGrpcService service;  // Outlives `server`, which calls into it.
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  std::once_flag shutdown_once;
};

KServeGrpcServer::KServeGrpcServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

KServeGrpcServer::~KServeGrpcServer() {
  Shutdown(std::chrono::system_clock::now());
  // gRPC counts a call done while the work-pool thread that finished it may still be inside
  // Finish(), reading the server's objects: wait for those threads before deleting them.
  impl_->service.AwaitCallsLetGo();
}

Result<std::unique_ptr<KServeGrpcServer>> KServeGrpcServer::Start(
    const GrpcServerOptions& options, const Limits& limits, ApiContext& context,
    Authenticator& auth, WorkPool& pool) {
  KServeGrpcServiceOptions service_options;
  service_options.heavy_request_bytes = limits.heavy_request_bytes;
  auto impl = std::make_unique<Impl>(context, auth, pool, service_options);
  // An IPv6 literal goes in brackets before the port.
  const std::string address =
      (limits.host.find(':') != std::string::npos ? "[" + limits.host + "]" : limits.host) + ":" +
      std::to_string(options.port);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &impl->port);
  builder.RegisterService(&impl->service);
  builder.SetMaxReceiveMessageSize(static_cast<int>(
      std::min<size_t>(limits.max_message_bytes, std::numeric_limits<int>::max())));
  builder.SetMaxSendMessageSize(std::numeric_limits<int>::max());
  // Without this, gRPC binds with SO_REUSEPORT, and a second server on the same port would
  // start and take a share of the calls instead of failing.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  impl->server = builder.BuildAndStart();
  if (!impl->server || impl->port == 0) {
    return Status::Unavailable("cannot listen for gRPC on " + address +
                               " (port in use, or the address is not this machine's); set "
                               "server.grpc_port (--grpc-port) to another port, or 0 for none");
  }
  return std::unique_ptr<KServeGrpcServer>(new KServeGrpcServer(std::move(impl)));
}

int KServeGrpcServer::port() const { return impl_->port; }

int64_t KServeGrpcServer::in_flight() const { return impl_->service.in_flight(); }

void KServeGrpcServer::Shutdown(std::chrono::system_clock::time_point deadline) {
  std::call_once(impl_->shutdown_once, [&] {
    if (impl_->server) impl_->server->Shutdown(deadline);
  });
}

}  // namespace tailcut
