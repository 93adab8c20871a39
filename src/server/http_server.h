// HttpServer: the event-driven HTTP/1.1 front door (Boost.Beast over Asio). A small fixed
// pool of IO threads accepts connections, reads requests with size limits and timeouts, and
// hands each to one handler. Handlers answer asynchronously through HttpExchange::Respond(),
// from any thread, so no request's work blocks an IO thread: tailcut serve's handler queues
// the request on the work pool, whose thread (or a later one) answers, and the response is
// written back on the connection's strand. While a request is handled, the connection is
// watched for its client going away (HttpExchange::cancellation()).
//
// A handler may instead stream its answer (HttpExchange::StartStream()): the head goes out at
// once and the body follows piece by piece in chunked transfer coding, each piece flushed as
// it is written (server-sent events for generated text). The pieces a slow reader has not
// taken yet are bounded per stream (max_stream_buffer_bytes); past the bound, or past the
// write timeout, the connection is closed and the exchange cancelled, so the producer stops.
//
// Limits enforced here, before any handler runs: header and body size (431 / 413), a budget
// of body bytes held across all connections (429), header and body read timeouts (slow
// clients are cut off), idle keep-alive timeout, and a cap on open connections. Framing is
// checked as RFC 9112 asks (Host, request-target form, transfer codings) before routing.
//
// Memory the clients can make this server hold is bounded by max_connections x (header limit
// + read buffer) plus max_in_flight_body_bytes: a body counts against the budget from its
// announcement until the handler takes it (HttpExchange::TakeBody()) or the request ends.
//
// Thread-safety: Start()/Shutdown() from one controlling thread; HttpExchange::Respond(),
// StartStream() and every HttpStream method from any thread; the handler runs on IO threads,
// so it must hand CPU work on (tailcut serve's hands every request to the work pool).
#pragma once

#include <boost/beast/http.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/cancellation.h"
#include "common/status.h"

namespace tailcut {

class MetricsRegistry;

using HttpRequest = boost::beast::http::request<boost::beast::http::string_body>;

struct HttpResponse {
  unsigned status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // Extra headers.
  bool close_connection = false;
};

// The body of a streamed response (HttpExchange::StartStream()). Write() queues a piece and
// returns at once; the connection's strand writes the queued pieces in order, each as one
// chunk, as soon as the socket takes them. Never blocks, so it may be called from a thread
// that must not wait (the generation step loop).
//
// The stream closes (Write() returns false from then on, closed() is true, and the exchange's
// cancellation() is set) when the client goes away, when the unsent bytes would exceed
// HttpServerOptions::max_stream_buffer_bytes, when a write takes longer than
// write_timeout_millis, or on Abort(). Its connection is then closed: the client sees a body
// without its last chunk, which HTTP clients report as an incomplete response.
//
// A stream dropped (last reference gone) without Finish() is aborted. Like an exchange, a
// stream must not outlive the server that made it.
//
// Thread-safety: all methods are safe from any thread; calls from several threads are written
// in the order they took the stream's lock.
class HttpStream {
 public:
  virtual ~HttpStream() = default;
  // Queues `piece` as one chunk. False (nothing queued) once the stream is closed or finished.
  // An empty piece queues nothing (an empty chunk would end the body).
  virtual bool Write(std::string piece) = 0;
  // Ends the body once what is queued is written (the last chunk); the connection then serves
  // its next request (keep-alive), unless the head asked to close it. Later calls do nothing.
  virtual void Finish() = 0;
  // Closes the connection now, dropping what is queued: for an error after the head was sent
  // that the body's format cannot report. Later calls do nothing.
  virtual void Abort() = 0;
  // True once the stream can take no more pieces (closed as above, aborted, or finished).
  virtual bool closed() const = 0;
};
using HttpStreamPtr = std::shared_ptr<HttpStream>;

// One request and the promise of its response.
class HttpExchange {
 public:
  virtual ~HttpExchange() = default;
  virtual const HttpRequest& request() const = 0;
  // Moves the request body out (request().body() is empty afterwards) and returns its bytes to
  // the server's in-flight body budget: handlers call it once, when they parse the body, so
  // the body is not held while the request waits for the model. Call it on the handler's
  // thread, before handing the exchange to another.
  virtual std::string TakeBody() = 0;
  // Sends the response; safe from any thread. Only the first call of Respond() or
  // StartStream() has an effect.
  virtual void Respond(HttpResponse response) = 0;
  // Starts a streamed response: sends `head`'s status, content type and headers (its body, if
  // any, is the stream's first piece) with Transfer-Encoding: chunked (to an HTTP/1.0 client:
  // no framing, and the connection closes at the end), and returns the stream for the body.
  // Null when Respond() or StartStream() was called before. Safe from any thread.
  virtual HttpStreamPtr StartStream(HttpResponse head) = 0;
  // Monotonic microseconds when the request's last byte was read.
  virtual int64_t received_micros() const = 0;
  virtual std::string_view remote_address() const = 0;
  // Set when the client closes (or resets) its connection before the response is sent (or, for
  // a stream, before it is finished, or when the stream closes for a slow reader), so
  // the request's queued work can be dropped (EmbedRequest::cancellation). Noticed while the
  // request is processed, unless another request is pipelined behind it on the connection.
  // Respond() stays safe to call; its write then fails quietly.
  virtual CancellationFlag cancellation() const = 0;

  std::string_view path() const;
  std::string_view query() const;
  // A header's value, or empty.
  std::string_view header(std::string_view name) const;
  // Path parameters the router extracted ("{name}" segments).
  std::map<std::string, std::string, std::less<>> params;
};
using HttpExchangePtr = std::shared_ptr<HttpExchange>;
using HttpHandler = std::function<void(const HttpExchangePtr&)>;

struct HttpServerOptions {
  // Address to bind. Loopback by default: exposing the server is a deliberate choice.
  std::string host = "127.0.0.1";
  // TCP port; 0 picks a free one (see HttpServer::port()).
  uint16_t port = 8080;
  // IO threads: they accept, read and write, nothing else (handlers hand requests to the work
  // pool, src/server/request_dispatcher.h). 0 = one per four CPUs the process may use, one
  // to four. One moves tens of thousands of small requests a second; more help with many
  // connections or very large bodies on machines with the cores for them.
  int io_threads = 0;
  // Largest request body; larger ones get 413 before the body is read.
  size_t max_body_bytes = 4 * 1024 * 1024;
  // Largest request header block; larger ones get 431.
  size_t max_header_bytes = 16 * 1024;
  // Most bytes of request bodies held at once across all connections. A body counts from when
  // its headers announce it (Content-Length) or its chunks arrive until its handler takes it;
  // a request that would go over gets 429 before more of its body is read. Must be at least
  // max_body_bytes, or the largest bodies could never be accepted.
  size_t max_in_flight_body_bytes = 256 * 1024 * 1024;
  // Time allowed for a request's headers to arrive (slowloris guard): on a new connection from
  // when it is accepted, on a kept-alive one from the first byte of its next request.
  int64_t header_timeout_millis = 10'000;
  // Time allowed for a request body to arrive once its headers are in.
  int64_t body_timeout_millis = 30'000;
  // How long a keep-alive connection may sit idle between requests (until the next request's
  // first byte; its headers then have header_timeout_millis).
  int64_t idle_timeout_millis = 60'000;
  // Time allowed to write a response to a slow reader (for a stream: each write of the pieces
  // queued at the time; a stream waiting for its producer has no time limit here).
  int64_t write_timeout_millis = 30'000;
  // Most bytes of one streamed response queued and not yet taken by the client's socket (the
  // kernel's socket buffers, a few MiB on Linux, come on top). A stream that would go over is
  // closed with its connection and its exchange cancelled: a client that reads slower than
  // tokens are generated must not make the server hold an unbounded answer. Memory held for
  // streams is at most max_connections x this. 1 MiB is many thousand SSE events of one token
  // each: raise it only for producers that write large pieces; a reader that falls that far
  // behind is not keeping up.
  size_t max_stream_buffer_bytes = 1024 * 1024;
  // Most open connections; further ones are closed at once. Bounds descriptors and, with the
  // header limit, the memory of connections (bodies are bounded by max_in_flight_body_bytes).
  int max_connections = 1024;
};

class HttpServer {
 public:
  static std::unique_ptr<HttpServer> Create(const HttpServerOptions& options, HttpHandler handler,
                                            MetricsRegistry* metrics);
  virtual ~HttpServer() = default;

  // Binds, listens and starts the IO threads. Errors name the address, or the option that is
  // inconsistent.
  virtual Status Start() = 0;
  // The bound port (after Start()).
  virtual uint16_t port() const = 0;
  // From now on every response closes its connection (clients reconnect elsewhere), while
  // new connections are still accepted: the first step of a graceful shutdown, which lets
  // clients that raced with the signal be served.
  virtual void CloseConnectionsAfterResponses() = 0;
  // Stops accepting (serving connections the kernel already completed); implies
  // CloseConnectionsAfterResponses().
  virtual void StopAccepting() = 0;
  // Requests read but not yet answered.
  virtual int64_t in_flight() const = 0;
  // Closes everything and joins the IO threads.
  virtual void Stop() = 0;
};

}  // namespace tailcut
