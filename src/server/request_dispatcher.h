// RequestDispatcher: the bridge from the HTTP server's IO threads to the work pool. Every
// request the server reads is handed, as is, to a work-pool thread, where it is routed,
// parsed, tokenised and (for cache hits) answered; the IO thread goes straight back to
// reading and writing sockets. A request with a large body goes to the pool's heavy lane, so
// a multi-MiB body being parsed never delays a small request on another connection
// (src/common/work_pool.h). When the pool's queue is full the request is answered 503 with
// Retry-After at once, on the IO thread: that answer is cheap, and it is honest.
//
// Thread-safety: the returned handler is safe to call from any number of IO threads.
#pragma once

#include <cstddef>

#include "common/work_pool.h"
#include "server/api_context.h"
#include "server/http_server.h"

namespace tailcut {

struct RequestDispatcherOptions {
  // Requests whose body is at least this many bytes run on the pool's heavy lane. Parsing
  // JSON costs roughly 5-20 ns per byte, so 64 KiB is well under a millisecond: below it a
  // request is as cheap as any; above it, it may hold its thread for tens of milliseconds.
  size_t heavy_body_bytes = 64 * 1024;
};

// The HttpHandler for HttpServer: runs `handler` on `pool`. `pool`, `context` and what
// `handler` refers to must outlive the queued requests: stop the server, then the pool.
HttpHandler DispatchToWorkPool(WorkPool& pool, HttpHandler handler, ApiContext& context,
                               const RequestDispatcherOptions& options);

}  // namespace tailcut
