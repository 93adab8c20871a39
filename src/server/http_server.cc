#include "server/http_server.h"

#include <spdlog/spdlog.h>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/version.hpp>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <list>
#include <mutex>
#include <optional>
#include <thread>

#include "common/clock.h"
#include "common/cpu_quota.h"
#include "obs/metrics.h"

namespace tailcut {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = asio::ip::tcp;

std::string ErrorJson(std::string_view type, std::string_view message) {
  // Minimal escaping: messages here are fixed strings or Beast error texts.
  std::string escaped;
  for (char c : message) {
    if (c == '"' || c == '\\') escaped += '\\';
    escaped += (static_cast<unsigned char>(c) < 0x20) ? ' ' : c;
  }
  return "{\"error\":{\"message\":\"" + escaped + "\",\"type\":\"" + std::string(type) + "\"}}";
}

// One IO thread per four CPUs, one to four: IO threads only move bytes (the work pool does
// the parsing and formatting), and one keeps up with tens of thousands of requests a second.
int AutoIoThreads() { return std::clamp((AvailableCpus() + 3) / 4, 1, 4); }

// The bytes of request bodies held at once, across connections (max_in_flight_body_bytes).
class BodyBudget {
 public:
  explicit BodyBudget(uint64_t limit_bytes) : limit_bytes_(limit_bytes) {}
  // Takes `bytes` if they fit under the limit; false (nothing taken) otherwise.
  bool TryTake(uint64_t bytes) {
    uint64_t used = used_bytes_.load();
    do {
      if (bytes > limit_bytes_ - std::min(used, limit_bytes_)) return false;
    } while (!used_bytes_.compare_exchange_weak(used, used + bytes));
    return true;
  }
  void Give(uint64_t bytes) { used_bytes_.fetch_sub(bytes); }
  uint64_t limit_bytes() const { return limit_bytes_; }

 private:
  const uint64_t limit_bytes_;
  std::atomic<uint64_t> used_bytes_{0};
};

// One request body's share of the budget; given back when reset or destroyed. It moves from
// the connection reading the body to the exchange holding it.
class BodyReservation {
 public:
  explicit BodyReservation(BodyBudget& budget) : budget_(&budget) {}
  BodyReservation(BodyReservation&& other) noexcept
      : budget_(other.budget_), bytes_(std::exchange(other.bytes_, 0)) {}
  BodyReservation& operator=(BodyReservation&& other) noexcept {
    if (this != &other) {
      Reset();
      budget_ = other.budget_;
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  ~BodyReservation() { Reset(); }
  // Grows the share to `total_bytes`; false (share unchanged) when the budget has no room.
  bool GrowTo(uint64_t total_bytes) {
    if (total_bytes <= bytes_) return true;
    if (!budget_->TryTake(total_bytes - bytes_)) return false;
    bytes_ = total_bytes;
    return true;
  }
  void Reset() {
    if (bytes_ > 0) budget_->Give(std::exchange(bytes_, 0));
  }

 private:
  BodyBudget* budget_;
  uint64_t bytes_ = 0;
};

bool IEquals(std::string_view a, std::string_view b) {
  return beast::iequals(beast::string_view(a.data(), a.size()),
                        beast::string_view(b.data(), b.size()));
}

// RFC 9112 checks Beast does not make. Returns the error response's status and message, or
// nullopt when the request may be read on; sets *origin_target to the origin-form target when
// the request used the absolute form (routing is on the path).
struct FramingError {
  unsigned status;
  std::string_view type;
  std::string message;
};

std::optional<FramingError> CheckFraming(const HttpRequest& req, std::string* origin_target) {
  // Host (RFC 9112 section 3.2): exactly one in HTTP/1.1, never more than one.
  const auto hosts = req.count(bhttp::field::host);
  if (hosts > 1) {
    return FramingError{400, "invalid_request_error", "more than one Host header"};
  }
  if (hosts == 0 && req.version() >= 11) {
    return FramingError{400, "invalid_request_error", "HTTP/1.1 requests need a Host header"};
  }
  // Request target (section 3.2): origin form ("/path?query"), or the absolute form
  // ("http://host/path?query"), which servers must accept and which routes on its path.
  const auto t = req.target();
  const std::string_view target(t.data(), t.size());
  origin_target->clear();
  if (target.empty() || target.front() != '/') {
    std::string_view rest;
    for (std::string_view scheme : {"http://", "https://"}) {
      if (target.size() >= scheme.size() && IEquals(target.substr(0, scheme.size()), scheme)) {
        rest = target.substr(scheme.size());
        break;
      }
    }
    const size_t path = rest.find_first_of("/?");
    if (rest.empty() || path == 0) {
      return FramingError{400, "invalid_request_error",
                          "the request target must be a path starting with '/' or an absolute "
                          "http(s) URL"};
    }
    *origin_target = path == std::string_view::npos ? "/" : std::string(rest.substr(path));
    if (origin_target->front() == '?') origin_target->insert(0, "/");
  }
  // Transfer codings (sections 6.1, 7): chunked, once and last, is all this server decodes.
  // Beast frames "gzip, chunked" as chunked and "chunked, gzip" as no body at all. The codings
  // of every Transfer-Encoding line, in order (fields::equal_range is wrong for lines that are
  // not adjacent).
  bool has_transfer_encoding = false;
  std::vector<std::string_view> codings;
  for (const auto& f : req) {
    if (f.name() != bhttp::field::transfer_encoding) continue;
    has_transfer_encoding = true;
    for (auto coding : bhttp::token_list(f.value())) {
      codings.emplace_back(coding.data(), coding.size());
    }
  }
  if (has_transfer_encoding) {
    if (codings.empty()) {
      return FramingError{400, "invalid_request_error", "Transfer-Encoding is empty"};
    }
    const auto chunked = std::count_if(codings.begin(), codings.end(),
                                       [](std::string_view c) { return IEquals(c, "chunked"); });
    if (chunked > 1 || (chunked == 1 && !IEquals(codings.back(), "chunked"))) {
      return FramingError{400, "invalid_request_error",
                          "Transfer-Encoding must end with 'chunked', applied once"};
    }
    for (std::string_view c : codings) {
      if (!IEquals(c, "chunked")) {
        return FramingError{501, "not_implemented_error",
                            "transfer coding '" + std::string(c.substr(0, 64)) +
                                "' is not supported: only 'chunked' is"};
      }
    }
  }
  return std::nullopt;
}

struct ServerMetrics {
  Gauge* open_connections;
  Counter* refused_connections;
  Counter* protocol_errors;
  Counter* timeouts;
  Counter* evicted_connections;
  Counter* client_disconnects;
};

class HttpServerImpl;
class HttpStreamImpl;

class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(tcp::socket&& socket, HttpServerImpl& server);
  ~HttpSession();
  void Start();
  // `head`: the request was HEAD, so the response carries the GET answer's headers only.
  void Write(HttpResponse response, bool keep_alive, unsigned version, bool head = false);
  std::string_view remote() const { return remote_; }
  // When the connection started waiting for its current request (reading it); 0 while a
  // request is being handled or answered. The eviction policy reads it under the server's
  // session-list lock.
  int64_t waiting_since_micros() const { return waiting_since_micros_.load(); }
  void CloseFromAnyThread();
  std::list<HttpSession*>::iterator registration;

  // Streamed responses (HttpExchange::StartStream()). BeginStream() writes the head, then
  // the pieces `stream` has queued; PumpStream() writes what it queued since (posted by the
  // stream when it queues into an idle stream); EndStream() ends the stream, `finished` when
  // its last chunk was written (else the connection closes and the exchange is cancelled).
  // The last two run on the strand.
  void BeginStream(std::shared_ptr<HttpStreamImpl> stream, HttpResponse head, bool keep_alive,
                   unsigned version, std::shared_ptr<Cancellation> cancellation);
  void PumpStream(const std::shared_ptr<HttpStreamImpl>& stream);
  void EndStream(bool finished);
  // Runs EndStream(false) on the strand.
  void AbortStreamFromAnyThread();
  void PumpStreamFromAnyThread(std::shared_ptr<HttpStreamImpl> stream);
  size_t max_stream_buffer_bytes() const;

 private:
  void ReadHeader();
  void ReadHeaderFields();
  void OnHeader(beast::error_code ec);
  void ReadBody();
  void OnBody(beast::error_code ec);
  // Parser callback before each chunk's bytes: grows the body and its budget share.
  void OnChunkHeader(std::uint64_t size, beast::error_code& ec);
  void Dispatch();
  // While a request is handled, watches the socket for the client going away (EOF or reset)
  // and then sets `cancellation`. Stops at the first byte of a pipelined request (that is
  // read after the response) and when the response is written.
  void WatchForDisconnect(std::shared_ptr<Cancellation> cancellation);
  void FailRequest(unsigned status, std::string_view type, std::string_view message,
                   std::vector<std::pair<std::string, std::string>> headers = {});
  void FailBudget(uint64_t body_bytes);
  void OnWrite(bool close, beast::error_code ec);
  // After an error response: stop sending, read and drop what the client still sends (its
  // unread body), then close. Closing at once with unread bytes would reset the connection,
  // and the reset can destroy the error response before the client reads it.
  void Linger();
  void Discard();
  void Close();

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  HttpServerImpl& server_;
  std::string remote_;
  bool first_request_ = true;
  // The current request's share of the body budget, its origin-form target when it came in
  // absolute form, and the body size the budget refused when the chunk callback stopped the
  // parser for it (0: not stopped).
  BodyReservation reservation_;
  std::string origin_target_;
  uint64_t over_budget_bytes_ = 0;
  // The parser keeps a reference to its chunk callback, so it lives here.
  std::function<void(std::uint64_t, beast::string_view, beast::error_code&)> on_chunk_header_;
  // Set by FailRequest: the response's write ends in Linger() instead of Close().
  bool linger_ = false;
  // A WatchForDisconnect wait is pending on the socket (cancelled before the write).
  bool watching_ = false;
  std::shared_ptr<bhttp::response<bhttp::string_body>> pending_;
  std::shared_ptr<bhttp::response<bhttp::empty_body>> continue_;
  std::atomic<int64_t> waiting_since_micros_{0};
  // The streamed response being written, if any (strand only): whether its connection closes
  // at the end, and the exchange's cancellation, set when it ends unfinished. The stream is
  // held weakly: its producer's last reference ending it unfinished aborts it.
  bool streaming_ = false;
  bool stream_close_ = false;
  std::weak_ptr<HttpStreamImpl> current_stream_;
  std::shared_ptr<Cancellation> stream_cancellation_;
};

// HttpStream's queue: framed chunks waiting for the strand to write them. Producers append
// under the mutex; the strand takes everything queued at once, so a burst of small pieces
// goes out in one write (still one chunk each).
class HttpStreamImpl final : public HttpStream,
                             public std::enable_shared_from_this<HttpStreamImpl> {
 public:
  HttpStreamImpl(std::shared_ptr<HttpSession> session, std::shared_ptr<Cancellation> cancellation,
                 bool chunked)
      : session_(std::move(session)),
        cancellation_(std::move(cancellation)),
        max_unsent_bytes_(session_->max_stream_buffer_bytes()),
        chunked_(chunked) {}
  ~HttpStreamImpl() override {
    // Dropped unfinished: the client must not wait for a body that will never end.
    if (!finished_ && !closed_) session_->AbortStreamFromAnyThread();
  }

  bool Write(std::string piece) override {
    if (piece.empty()) return !closed();
    bool over = false;
    bool post = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (closed_ || finished_) return false;
      const size_t before = queued_.size();
      if (chunked_) {
        char size[20];
        const int n = std::snprintf(size, sizeof size, "%zx\r\n", piece.size());
        queued_.append(size, static_cast<size_t>(n));
      }
      queued_ += piece;
      if (chunked_) queued_ += "\r\n";
      const size_t framed = queued_.size() - before;
      if (unsent_bytes_ + framed > max_unsent_bytes_) {
        queued_.resize(before);
        closed_ = true;
        over = true;
      } else {
        unsent_bytes_ += framed;
        post = !std::exchange(pumping_, true);
      }
    }
    if (over) {
      cancellation_->Cancel();
      session_->AbortStreamFromAnyThread();
      return false;
    }
    if (post) session_->PumpStreamFromAnyThread(shared_from_this());
    return true;
  }

  void Finish() override {
    bool post = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (closed_ || finished_) return;
      finished_ = true;
      if (chunked_) {
        queued_ += "0\r\n\r\n";
        unsent_bytes_ += 5;
      }
      post = !std::exchange(pumping_, true);
    }
    if (post) session_->PumpStreamFromAnyThread(shared_from_this());
  }

  void Abort() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (closed_ || finished_) return;
      closed_ = true;
    }
    cancellation_->Cancel();
    session_->AbortStreamFromAnyThread();
  }

  bool closed() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return closed_ || finished_;
  }

  // --- The strand's side ------------------------------------------------------------------
  struct Queued {
    std::string bytes;
    bool last = false;  // The body ends with these bytes.
  };
  // Everything queued so far. Nothing (and not last) means the stream is idle: the next
  // Write() or Finish() posts PumpStream() again.
  Queued Take() {
    std::lock_guard<std::mutex> lock(mutex_);
    Queued q;
    q.bytes = std::exchange(queued_, std::string());
    q.last = finished_ && !last_taken_;
    last_taken_ = last_taken_ || q.last;
    if (q.bytes.empty() && !q.last) pumping_ = false;
    return q;
  }
  // `bytes` of what Take() gave were written.
  void Sent(size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    unsent_bytes_ -= std::min(bytes, unsent_bytes_);
  }
  // The connection ended the stream (an error, the client gone, or its end written).
  void MarkClosed() {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = true;
  }

 private:
  const std::shared_ptr<HttpSession> session_;
  const std::shared_ptr<Cancellation> cancellation_;
  const size_t max_unsent_bytes_;
  const bool chunked_;  // False for an HTTP/1.0 client: raw bytes, ended by closing.
  mutable std::mutex mutex_;
  std::string queued_;        // Framed, not yet taken by the strand. Guarded by mutex_.
  size_t unsent_bytes_ = 0;   // Queued or being written. Guarded by mutex_.
  bool pumping_ = true;       // The strand writes (the head first) or is posted to; mutex_.
  bool finished_ = false;     // Finish() was called. Guarded by mutex_.
  bool last_taken_ = false;   // Take() has returned the body's end. Guarded by mutex_.
  bool closed_ = false;       // Guarded by mutex_.
};

class HttpExchangeImpl final : public HttpExchange {
 public:
  HttpExchangeImpl(std::shared_ptr<HttpSession> session, HttpRequest request,
                   BodyReservation reservation, int64_t received,
                   std::shared_ptr<Cancellation> cancellation)
      : session_(std::move(session)),
        request_(std::move(request)),
        reservation_(std::move(reservation)),
        received_(received),
        cancellation_(std::move(cancellation)) {}
  ~HttpExchangeImpl() override {
    if (!responded_.load()) {
      // A handler dropped the request without answering: never leave a client hanging.
      HttpResponse r;
      r.status = 500;
      r.body = ErrorJson("internal_error", "the request was dropped without a response");
      Respond(std::move(r));
    }
  }
  const HttpRequest& request() const override { return request_; }
  std::string TakeBody() override {
    std::string body = std::move(request_.body());
    request_.body() = std::string();  // A moved-from string's state is unspecified.
    reservation_.Reset();
    return body;
  }
  void Respond(HttpResponse response) override {
    if (responded_.exchange(true)) return;
    session_->Write(std::move(response), request_.keep_alive(), request_.version(),
                    request_.method() == bhttp::verb::head);
  }
  HttpStreamPtr StartStream(HttpResponse head) override {
    if (responded_.exchange(true)) return nullptr;
    auto stream =
        std::make_shared<HttpStreamImpl>(session_, cancellation_, request_.version() >= 11);
    std::string first = std::exchange(head.body, std::string());
    session_->BeginStream(stream, std::move(head), request_.keep_alive(), request_.version(),
                          cancellation_);
    stream->Write(std::move(first));  // Written after the head (the stream starts "pumping").
    return stream;
  }
  int64_t received_micros() const override { return received_; }
  std::string_view remote_address() const override { return session_->remote(); }
  CancellationFlag cancellation() const override { return cancellation_; }

 private:
  std::shared_ptr<HttpSession> session_;
  HttpRequest request_;
  BodyReservation reservation_;  // The body's share of the budget, until taken.
  int64_t received_;
  const std::shared_ptr<Cancellation> cancellation_;
  std::atomic<bool> responded_{false};
};

class HttpServerImpl final : public HttpServer {
 public:
  HttpServerImpl(const HttpServerOptions& options, HttpHandler handler, MetricsRegistry* metrics)
      : options_(options),
        handler_(std::move(handler)),
        body_budget_(options.max_in_flight_body_bytes),
        acceptor_(asio::make_strand(io_)) {
    if (metrics) {
      metrics_.open_connections =
          &metrics->AddGauge("tailcut_http_open_connections", "Open client connections").Get();
      metrics_.refused_connections =
          &metrics
               ->AddCounter("tailcut_http_refused_connections_total",
                            "Connections closed at once because max_connections were open")
               .Get();
      metrics_.protocol_errors =
          &metrics
               ->AddCounter("tailcut_http_protocol_errors_total",
                            "Requests rejected before routing (malformed, too large)")
               .Get();
      metrics_.timeouts = &metrics
                               ->AddCounter("tailcut_http_timeouts_total",
                                            "Connections closed because a read or write timed out")
                               .Get();
      metrics_.evicted_connections =
          &metrics
               ->AddCounter("tailcut_http_evicted_connections_total",
                            "Connections closed to make room at max_connections: the one that "
                            "had waited longest for a request that never completed")
               .Get();
      metrics_.client_disconnects =
          &metrics
               ->AddCounter("tailcut_http_client_disconnects_total",
                            "Requests whose client closed the connection before the answer "
                            "(their queued work is dropped)")
               .Get();
    } else {
      metrics_ = {&local_gauge_,       &local_counters_[0], &local_counters_[1],
                  &local_counters_[2], &local_counters_[3], &local_counters_[4]};
    }
  }
  ~HttpServerImpl() override { Stop(); }

  Status Start() override {
    if (options_.max_in_flight_body_bytes < options_.max_body_bytes) {
      return Status::InvalidArgument(
          "max_in_flight_body_bytes (" + std::to_string(options_.max_in_flight_body_bytes) +
          ") is smaller than max_body_bytes (" + std::to_string(options_.max_body_bytes) +
          "): bodies of the largest allowed size could never be accepted");
    }
    beast::error_code ec;
    auto address = asio::ip::make_address(options_.host, ec);
    if (ec) return Status::InvalidArgument("cannot parse host '" + options_.host + "': " + ec.message());
    tcp::endpoint endpoint(address, options_.port);
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      return Status::Unavailable("cannot listen on " + options_.host + ":" +
                                 std::to_string(options_.port) + ": " + ec.message());
    }
    port_ = acceptor_.local_endpoint().port();
    Accept();
    // Keeps io_.run() going when nothing is pending: while every connection waits for its
    // handler's answer (no read posted) and the acceptor is closed by StopAccepting(), the IO
    // threads would otherwise return, and the answers of a draining shutdown never be sent.
    work_.emplace(io_.get_executor());
    const int threads = options_.io_threads > 0 ? options_.io_threads : AutoIoThreads();
    for (int i = 0; i < threads; ++i) {
      threads_.emplace_back([this] { io_.run(); });
    }
    return Status::Ok();
  }

  uint16_t port() const override { return port_; }

  void CloseConnectionsAfterResponses() override { closing_ = true; }

  void StopAccepting() override {
    closing_ = true;
    accepting_ = false;
    asio::post(acceptor_.get_executor(), [this] {
      beast::error_code ec;
      acceptor_.cancel(ec);
      // Connections the kernel already completed are clients that connected before we
      // stopped and may have sent a request: serve them (their responses close the
      // connection) rather than reset them with the listening socket.
      acceptor_.non_blocking(true, ec);
      for (int taken = 0; taken < options_.max_connections; ++taken) {
        tcp::socket socket(asio::make_strand(io_));
        acceptor_.accept(socket, ec);
        if (ec) break;
        std::make_shared<HttpSession>(std::move(socket), *this)->Start();
      }
      acceptor_.close(ec);
    });
  }

  int64_t in_flight() const override { return in_flight_.load(); }

  void Stop() override {
    if (stopped_.exchange(true)) return;
    StopAccepting();
    work_.reset();
    io_.stop();
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

  const HttpServerOptions& options() const { return options_; }
  bool closing() const { return closing_.load(); }
  ServerMetrics& metrics() { return metrics_; }
  BodyBudget& body_budget() { return body_budget_; }
  void Handle(const HttpExchangePtr& exchange) { handler_(exchange); }
  void RequestStarted() { in_flight_.fetch_add(1); }
  void RequestFinished() { in_flight_.fetch_sub(1); }
  void SessionOpened(HttpSession* session) {
    open_.fetch_add(1);
    metrics_.open_connections->Inc();
    std::lock_guard<std::mutex> lock(sessions_mutex_);
    sessions_.push_front(session);
    session->registration = sessions_.begin();
  }
  void SessionClosed(HttpSession* session) {
    {
      std::lock_guard<std::mutex> lock(sessions_mutex_);
      sessions_.erase(session->registration);
    }
    open_.fetch_sub(1);
    metrics_.open_connections->Dec();
  }

  // At the connection limit, a new client should not be turned away because slow or idle
  // clients hold every slot (slowloris): close the connection that has waited longest for a
  // request it never finished, and let the new one in. Connections whose request is being
  // handled are never evicted. False when every connection is busy.
  bool EvictStalestWaiting() {
    std::shared_ptr<HttpSession> victim;
    {
      std::lock_guard<std::mutex> lock(sessions_mutex_);
      HttpSession* oldest = nullptr;
      int64_t oldest_since = 0;
      // Sessions in the list are alive: a destructor unregisters under this mutex first.
      for (HttpSession* s : sessions_) {
        const int64_t since = s->waiting_since_micros();
        if (since > 0 && (!oldest || since < oldest_since)) {
          oldest = s;
          oldest_since = since;
        }
      }
      if (oldest) victim = oldest->weak_from_this().lock();
    }
    if (!victim) return false;
    metrics_.evicted_connections->Inc();
    victim->CloseFromAnyThread();
    return true;
  }

 private:
  void Accept() {
    acceptor_.async_accept(asio::make_strand(io_), [this](beast::error_code ec, tcp::socket socket) {
      if (ec) {
        if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
        spdlog::warn("accept failed: {}", ec.message());
      } else if (open_.load() >= options_.max_connections && !EvictStalestWaiting()) {
        metrics_.refused_connections->Inc();
        beast::error_code ignored;
        socket.shutdown(tcp::socket::shutdown_both, ignored);
        socket.close(ignored);
      } else {
        std::make_shared<HttpSession>(std::move(socket), *this)->Start();
      }
      if (accepting_.load() && acceptor_.is_open()) Accept();
    });
  }

  HttpServerOptions options_;
  HttpHandler handler_;
  // Declared before io_ so they outlive it: destroying io_ destroys the handlers it still
  // holds, and with them the last sessions, whose destructors unregister here.
  std::atomic<int> open_{0};
  std::mutex sessions_mutex_;
  std::list<HttpSession*> sessions_;  // Guarded by sessions_mutex_.
  ServerMetrics metrics_{};
  BodyBudget body_budget_;
  Gauge local_gauge_;
  Counter local_counters_[5];
  asio::io_context io_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  tcp::acceptor acceptor_;
  std::vector<std::thread> threads_;
  uint16_t port_ = 0;
  std::atomic<bool> accepting_{true};
  std::atomic<bool> closing_{false};
  std::atomic<bool> stopped_{false};
  std::atomic<int64_t> in_flight_{0};
};

HttpSession::HttpSession(tcp::socket&& socket, HttpServerImpl& server)
    : stream_(std::move(socket)), server_(server), reservation_(server.body_budget()) {
  on_chunk_header_ = [this](std::uint64_t size, beast::string_view, beast::error_code& ec) {
    OnChunkHeader(size, ec);
  };
  beast::error_code ec;
  auto ep = stream_.socket().remote_endpoint(ec);
  if (!ec) remote_ = ep.address().to_string() + ":" + std::to_string(ep.port());
  stream_.socket().set_option(tcp::no_delay(true), ec);
  server_.SessionOpened(this);
}

HttpSession::~HttpSession() { server_.SessionClosed(this); }

void HttpSession::CloseFromAnyThread() {
  asio::post(stream_.get_executor(), [self = shared_from_this()] { self->Close(); });
}

void HttpSession::Start() {
  asio::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->ReadHeader(); });
}

void HttpSession::ReadHeader() {
  waiting_since_micros_ = SystemClock::Get().NowMicros();
  reservation_.Reset();
  over_budget_bytes_ = 0;
  parser_.emplace();
  parser_->header_limit(static_cast<std::uint32_t>(server_.options().max_header_bytes));
  parser_->body_limit(server_.options().max_body_bytes);
  parser_->on_chunk_header(on_chunk_header_);
  if (first_request_ || buffer_.size() > 0) return ReadHeaderFields();
  // A kept-alive connection may idle until its next request starts; from its first byte, the
  // headers have the header timeout like a new connection's (not the idle timeout again).
  stream_.expires_after(std::chrono::milliseconds(server_.options().idle_timeout_millis));
  stream_.async_read_some(buffer_.prepare(beast::read_size(buffer_, 65536)),
                          [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                            self->buffer_.commit(n);
                            if (ec) return self->OnHeader(ec);
                            self->ReadHeaderFields();
                          });
}

void HttpSession::ReadHeaderFields() {
  const int64_t timeout = server_.options().header_timeout_millis;
  stream_.expires_after(std::chrono::milliseconds(timeout));
  bhttp::async_read_header(stream_, buffer_, *parser_,
                           [self = shared_from_this()](beast::error_code ec, std::size_t) {
                             self->OnHeader(ec);
                           });
}

void HttpSession::OnHeader(beast::error_code ec) {
  if (ec == asio::error::operation_aborted) return;  // Closed by us (eviction, shutdown).
  if (ec == bhttp::error::end_of_stream || ec == asio::error::connection_reset ||
      ec == asio::error::eof) {
    return Close();
  }
  if (ec == beast::error::timeout) {
    server_.metrics().timeouts->Inc();
    return Close();
  }
  if (ec == bhttp::error::header_limit) {
    return FailRequest(431, "invalid_request_error", "request headers are too large");
  }
  if (ec == bhttp::error::body_limit) {
    // The parser checks a declared Content-Length against the body limit as soon as the
    // headers are in, so an oversized body is refused here, before any of it is read. It
    // fails before marking the header done, so content_length() may not be asked (it asserts
    // is_header_done()); the field itself is in the message, and Beast has checked that it
    // is a number.
    std::string declared;
    if (const auto length = parser_->get()[bhttp::field::content_length]; !length.empty()) {
      declared = " of " + std::string(length) + " bytes";
    }
    return FailRequest(413, "payload_too_large_error",
                       "request body" + declared + " exceeds the limit of " +
                           std::to_string(server_.options().max_body_bytes) + " bytes");
  }
  if (ec) return FailRequest(400, "invalid_request_error", "malformed HTTP request: " + ec.message());
  first_request_ = false;

  const auto& req = parser_->get();
  if (auto error = CheckFraming(req, &origin_target_)) {
    return FailRequest(error->status, error->type, error->message);
  }
  if (auto length = parser_->content_length();
      length && *length > server_.options().max_body_bytes) {
    return FailRequest(413, "payload_too_large_error",
                       "request body of " + std::to_string(*length) + " bytes exceeds the limit of " +
                           std::to_string(server_.options().max_body_bytes));
  }
  // A declared body is allocated whole when its first bytes arrive: it is charged now, before
  // any of it is read. Chunked bodies are charged chunk by chunk (OnChunkHeader).
  if (auto length = parser_->content_length(); length && !reservation_.GrowTo(*length)) {
    return FailBudget(*length);
  }
  if (beast::iequals(req[bhttp::field::expect], "100-continue")) {
    // curl and other clients wait (up to a second) for this before sending a large body.
    continue_ = std::make_shared<bhttp::response<bhttp::empty_body>>(bhttp::status::continue_,
                                                                     req.version());
    bhttp::async_write(stream_, *continue_,
                       [self = shared_from_this()](beast::error_code ec, std::size_t) {
                         self->continue_.reset();
                         if (ec) return self->Close();
                         self->ReadBody();
                       });
    return;
  }
  ReadBody();
}

void HttpSession::OnChunkHeader(std::uint64_t size, beast::error_code& ec) {
  // The parser has checked the running total against the body limit already.
  std::string& body = parser_->get().body();
  const uint64_t needed = body.size() + size;
  if (needed <= body.capacity()) return;
  // Grow geometrically (amortised copies), never past the body limit, and charge the budget
  // for the whole new capacity before allocating it. A fresh string reserves exactly what it
  // is asked for, where growing one in place may double it.
  const uint64_t capacity = std::max<uint64_t>(
      needed, std::min<uint64_t>(2 * body.capacity(), server_.options().max_body_bytes));
  if (!reservation_.GrowTo(capacity)) {
    over_budget_bytes_ = needed;
    ec = bhttp::error::body_limit;  // Stops the parser; OnBody answers 429.
    return;
  }
  std::string grown;
  grown.reserve(capacity);
  grown.append(body);
  body.swap(grown);
}

void HttpSession::ReadBody() {
  if (parser_->is_done()) return Dispatch();
  stream_.expires_after(std::chrono::milliseconds(server_.options().body_timeout_millis));
  bhttp::async_read(stream_, buffer_, *parser_,
                    [self = shared_from_this()](beast::error_code ec, std::size_t) {
                      self->OnBody(ec);
                    });
}

void HttpSession::OnBody(beast::error_code ec) {
  if (ec == asio::error::operation_aborted) return;
  if (ec == beast::error::timeout) {
    server_.metrics().timeouts->Inc();
    return Close();
  }
  if (over_budget_bytes_ > 0) return FailBudget(over_budget_bytes_);
  if (ec == bhttp::error::body_limit) {
    return FailRequest(413, "payload_too_large_error",
                       "request body exceeds the limit of " +
                           std::to_string(server_.options().max_body_bytes) + " bytes");
  }
  if (ec == bhttp::error::end_of_stream || ec == asio::error::eof ||
      ec == asio::error::connection_reset) {
    return Close();
  }
  if (ec) return FailRequest(400, "invalid_request_error", "malformed HTTP request: " + ec.message());
  Dispatch();
}

void HttpSession::Dispatch() {
  waiting_since_micros_ = 0;
  stream_.expires_never();  // The handler's own deadline governs from here.
  server_.RequestStarted();
  HttpRequest request = parser_->release();
  if (!origin_target_.empty()) request.target(origin_target_);
  auto cancellation = std::make_shared<Cancellation>();
  auto exchange = std::make_shared<HttpExchangeImpl>(shared_from_this(), std::move(request),
                                                     std::move(reservation_),
                                                     SystemClock::Get().NowMicros(), cancellation);
  // Bytes already buffered are the next pipelined request: the client is still there.
  if (buffer_.size() == 0) WatchForDisconnect(std::move(cancellation));
  server_.Handle(exchange);
}

void HttpSession::WatchForDisconnect(std::shared_ptr<Cancellation> cancellation) {
  watching_ = true;
  stream_.socket().async_wait(
      tcp::socket::wait_read,
      [self = shared_from_this(), cancellation = std::move(cancellation)](beast::error_code ec) {
        if (ec == asio::error::operation_aborted || !self->watching_) return;  // Answered.
        self->watching_ = false;
        if (!ec) {
          // Readable: a pipelined request's bytes, or the end of the stream. Peek, so that a
          // request is left for the parser after the response.
          char byte;
          const ssize_t n = ::recv(self->stream_.socket().native_handle(), &byte, 1,
                                   MSG_PEEK | MSG_DONTWAIT);
          if (n > 0) return;
          if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            return self->WatchForDisconnect(cancellation);
          }
        }
        // EOF or an error: nobody will read the answer. (A client that only half-closes its
        // side after sending is treated the same, as nginx does.)
        cancellation->Cancel();
        self->server_.metrics().client_disconnects->Inc();
        self->EndStream(false);  // A streamed answer stops here (no-op for others).

      });
}

void HttpSession::FailRequest(unsigned status, std::string_view type, std::string_view message,
                              std::vector<std::pair<std::string, std::string>> headers) {
  waiting_since_micros_ = 0;
  parser_.reset();  // Nothing of the body is kept (the connection may linger a while).
  reservation_.Reset();
  server_.metrics().protocol_errors->Inc();
  server_.RequestStarted();
  HttpResponse r;
  r.status = status;
  r.body = ErrorJson(type, message);
  r.headers = std::move(headers);
  r.close_connection = true;  // The stream is in an unknown state after a framing error.
  linger_ = true;
  Write(std::move(r), false, 11);
}

void HttpSession::FailBudget(uint64_t body_bytes) {
  FailRequest(429, "overloaded_error",
              "request bodies in flight would exceed max_in_flight_body_bytes (" +
                  std::to_string(server_.body_budget().limit_bytes()) + " bytes) with this body (" +
                  std::to_string(body_bytes) + " bytes); retry later",
              {{"Retry-After", "1"}});
}

void HttpSession::Write(HttpResponse response, bool keep_alive, unsigned version, bool head) {
  asio::dispatch(stream_.get_executor(), [self = shared_from_this(), response = std::move(response),
                                          keep_alive, version, head]() mutable {
    auto res = std::make_shared<bhttp::response<bhttp::string_body>>(
        static_cast<bhttp::status>(response.status), version);
    res->set(bhttp::field::server, "tailcut");
    res->set(bhttp::field::content_type, response.content_type);
    for (auto& [name, value] : response.headers) res->insert(name, value);
    const bool close =
        response.close_connection || !keep_alive || self->server_.closing();
    res->keep_alive(!close);
    res->body() = std::move(response.body);
    res->prepare_payload();
    if (head) {
      // A HEAD answer must not carry the body it announces: the client reads none, and the
      // bytes would be taken as the start of the next response on a keep-alive connection.
      const auto length = res->body().size();
      res->body().clear();
      res->content_length(length);
    }
    self->pending_ = res;
    if (self->watching_) {
      // Ends the disconnect watch (its handler sees operation_aborted); no other operation
      // is pending on the socket while a request is handled.
      self->watching_ = false;
      beast::error_code ignored;
      self->stream_.socket().cancel(ignored);
    }
    self->stream_.expires_after(
        std::chrono::milliseconds(self->server_.options().write_timeout_millis));
    bhttp::async_write(self->stream_, *res,
                       [self, close](beast::error_code ec, std::size_t) { self->OnWrite(close, ec); });
  });
}

size_t HttpSession::max_stream_buffer_bytes() const {
  return server_.options().max_stream_buffer_bytes;
}

void HttpSession::AbortStreamFromAnyThread() {
  asio::post(stream_.get_executor(), [self = shared_from_this()] { self->EndStream(false); });
}

void HttpSession::PumpStreamFromAnyThread(std::shared_ptr<HttpStreamImpl> stream) {
  asio::post(stream_.get_executor(), [self = shared_from_this(), stream = std::move(stream)] {
    self->PumpStream(stream);
  });
}

void HttpSession::BeginStream(std::shared_ptr<HttpStreamImpl> stream, HttpResponse head,
                              bool keep_alive, unsigned version,
                              std::shared_ptr<Cancellation> cancellation) {
  asio::dispatch(stream_.get_executor(), [self = shared_from_this(), stream = std::move(stream),
                                          head = std::move(head), keep_alive, version,
                                          cancellation = std::move(cancellation)]() mutable {
    struct Head {
      bhttp::response<bhttp::empty_body> message;
      std::optional<bhttp::response_serializer<bhttp::empty_body>> serializer;
    };
    auto h = std::make_shared<Head>();
    h->message.result(static_cast<bhttp::status>(head.status));
    h->message.version(version);
    h->message.set(bhttp::field::server, "tailcut");
    h->message.set(bhttp::field::content_type, head.content_type);
    for (auto& [name, value] : head.headers) h->message.insert(name, value);
    // HTTP/1.0 has no chunked coding: its body ends when the connection does.
    const bool close =
        head.close_connection || !keep_alive || version < 11 || self->server_.closing();
    h->message.keep_alive(!close);
    if (version >= 11) h->message.chunked(true);
    self->streaming_ = true;
    self->stream_close_ = close;
    self->current_stream_ = stream;
    self->stream_cancellation_ = std::move(cancellation);
    // The disconnect watch (WatchForDisconnect) stays on while the body streams: a client that
    // goes away mid-stream cancels the exchange and ends the stream.
    h->serializer.emplace(h->message);
    self->stream_.expires_after(
        std::chrono::milliseconds(self->server_.options().write_timeout_millis));
    bhttp::async_write_header(self->stream_, *h->serializer,
                              [self, h, stream](beast::error_code ec, std::size_t) {
                                if (ec == beast::error::timeout) {
                                  self->server_.metrics().timeouts->Inc();
                                }
                                if (ec) return self->EndStream(false);
                                self->PumpStream(stream);
                              });
  });
}

void HttpSession::PumpStream(const std::shared_ptr<HttpStreamImpl>& stream) {
  if (!streaming_ || current_stream_.lock() != stream) return;  // Ended meanwhile.
  HttpStreamImpl::Queued q = stream->Take();
  if (q.bytes.empty()) {
    if (q.last) return EndStream(true);  // HTTP/1.0: nothing marks the end but the close.
    // Idle until the producer writes again, however long that takes.
    stream_.expires_never();
    return;
  }
  auto bytes = std::make_shared<std::string>(std::move(q.bytes));
  stream_.expires_after(std::chrono::milliseconds(server_.options().write_timeout_millis));
  asio::async_write(stream_, asio::buffer(*bytes),
                    [self = shared_from_this(), stream, bytes, last = q.last](
                        beast::error_code ec, std::size_t n) {
                      if (ec == beast::error::timeout) self->server_.metrics().timeouts->Inc();
                      if (ec) return self->EndStream(false);
                      stream->Sent(n);
                      if (last) return self->EndStream(true);
                      self->PumpStream(stream);
                    });
}

void HttpSession::EndStream(bool finished) {
  if (!streaming_) return;
  streaming_ = false;
  if (auto stream = current_stream_.lock()) stream->MarkClosed();
  current_stream_.reset();
  auto cancellation = std::move(stream_cancellation_);
  stream_cancellation_.reset();
  server_.RequestFinished();
  if (!finished) {
    // The client is gone, too slow, or the producer gave up: nobody reads on.
    cancellation->Cancel();
    return Close();
  }
  if (watching_) {
    // No write is pending: only the disconnect watch is cancelled.
    watching_ = false;
    beast::error_code ignored;
    stream_.socket().cancel(ignored);
  }
  if (stream_close_) return Close();
  ReadHeader();
}

void HttpSession::OnWrite(bool close, beast::error_code ec) {
  pending_.reset();
  server_.RequestFinished();
  if (ec == beast::error::timeout) server_.metrics().timeouts->Inc();
  if (ec) return Close();
  if (close) return linger_ ? Linger() : Close();
  ReadHeader();
}

void HttpSession::Linger() {
  beast::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  if (ec) return Close();
  // For as long as a body may take to arrive. A lingering connection holds no memory beyond
  // its read buffer, and it may be evicted like an idle one.
  waiting_since_micros_ = SystemClock::Get().NowMicros();
  stream_.expires_after(std::chrono::milliseconds(server_.options().body_timeout_millis));
  buffer_.consume(buffer_.size());
  Discard();
}

void HttpSession::Discard() {
  stream_.async_read_some(buffer_.prepare(beast::read_size(buffer_, 65536)),
                          [self = shared_from_this()](beast::error_code ec, std::size_t) {
                            // Never committed: the bytes are dropped.
                            if (ec == asio::error::operation_aborted) return;
                            if (ec) return self->Close();  // EOF, or the time is up.
                            self->Discard();
                          });
}

void HttpSession::Close() {
  beast::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  stream_.close();
}

}  // namespace

std::string_view HttpExchange::path() const {
  const auto t = request().target();
  const std::string_view target(t.data(), t.size());
  const size_t q = target.find('?');
  return q == std::string_view::npos ? target : target.substr(0, q);
}

std::string_view HttpExchange::query() const {
  const auto t = request().target();
  const std::string_view target(t.data(), t.size());
  const size_t q = target.find('?');
  return q == std::string_view::npos ? std::string_view() : target.substr(q + 1);
}

std::string_view HttpExchange::header(std::string_view name) const {
  auto it = request().find(beast::string_view(name.data(), name.size()));
  if (it == request().end()) return {};
  return {it->value().data(), it->value().size()};
}

std::unique_ptr<HttpServer> HttpServer::Create(const HttpServerOptions& options,
                                               HttpHandler handler, MetricsRegistry* metrics) {
  return std::make_unique<HttpServerImpl>(options, std::move(handler), metrics);
}

}  // namespace tailcut
