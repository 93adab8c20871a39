// KServeGrpcServer: the gRPC listener for KServe v2 (KServeGrpcService) on its own port, the
// second front door beside the HTTP server. Built on gRPC++'s callback API: gRPC's own
// threads take calls in and send answers; the work happens on the work pool.
//
// Lifetime: Start() listens at once. Shutdown() stops taking calls and waits for those in
// flight until its deadline (then cancels them); it returns only once every call is done,
// which needs their answers: the core API must still be running (or failing what is queued)
// while it waits. The context, authenticator and pool passed to Start() must outlive the
// server.
//
// Thread-safety: port() and in_flight() from any thread; Shutdown() once, from one thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"
#include "common/work_pool.h"
#include "server/api_context.h"
#include "server/auth.h"

namespace tailcut {

struct GrpcServerOptions {
  // TCP port for KServe v2 over gRPC (Triton's default 8001); 0 = no gRPC listener. The
  // address is the HTTP server's (server.host). A port that is taken fails start-up: gRPC's
  // SO_REUSEPORT is turned off, so a second server cannot silently share the port.
  int port = 8001;
};

class KServeGrpcServer {
 public:
  // What the server takes from the rest of the process's configuration.
  struct Limits {
    std::string host = "127.0.0.1";
    // Largest request message, as server.max_body_bytes bounds an HTTP body; larger ones get
    // RESOURCE_EXHAUSTED from gRPC before they are parsed.
    size_t max_message_bytes = 4 * 1024 * 1024;
    // Messages this large or larger run on the work pool's heavy lane.
    size_t heavy_request_bytes = 64 * 1024;
  };

  // Listens on options.port (not 0) and serves; an error names the address when it cannot.
  static Result<std::unique_ptr<KServeGrpcServer>> Start(const GrpcServerOptions& options,
                                                         const Limits& limits,
                                                         ApiContext& context, Authenticator& auth,
                                                         WorkPool& pool);
  // Shutdown() now, if it has not run; then waits until every answer has been handed over.
  ~KServeGrpcServer();

  int port() const;
  int64_t in_flight() const;
  // See the file comment. Idempotent.
  void Shutdown(std::chrono::system_clock::time_point deadline);

 private:
  struct Impl;
  explicit KServeGrpcServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tailcut
