#include "server/http_server.h"

#include <spdlog/spdlog.h>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/version.hpp>
#include <list>
#include <mutex>
#include <optional>
#include <thread>

#include "common/clock.h"
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

struct ServerMetrics {
  Gauge* open_connections;
  Counter* refused_connections;
  Counter* protocol_errors;
  Counter* timeouts;
  Counter* evicted_connections;
};

class HttpServerImpl;

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

 private:
  void ReadHeader();
  void OnHeader(beast::error_code ec);
  void ReadBody();
  void OnBody(beast::error_code ec);
  void Dispatch();
  void FailRequest(unsigned status, std::string_view type, std::string_view message);
  void OnWrite(bool close, beast::error_code ec);
  void Close();

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  HttpServerImpl& server_;
  std::string remote_;
  bool first_request_ = true;
  std::shared_ptr<bhttp::response<bhttp::string_body>> pending_;
  std::shared_ptr<bhttp::response<bhttp::empty_body>> continue_;
  std::atomic<int64_t> waiting_since_micros_{0};
};

class HttpExchangeImpl final : public HttpExchange {
 public:
  HttpExchangeImpl(std::shared_ptr<HttpSession> session, HttpRequest request, int64_t received)
      : session_(std::move(session)), request_(std::move(request)), received_(received) {}
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
  void Respond(HttpResponse response) override {
    if (responded_.exchange(true)) return;
    session_->Write(std::move(response), request_.keep_alive(), request_.version(),
                    request_.method() == bhttp::verb::head);
  }
  int64_t received_micros() const override { return received_; }
  std::string_view remote_address() const override { return session_->remote(); }

 private:
  std::shared_ptr<HttpSession> session_;
  HttpRequest request_;
  int64_t received_;
  std::atomic<bool> responded_{false};
};

class HttpServerImpl final : public HttpServer {
 public:
  HttpServerImpl(const HttpServerOptions& options, HttpHandler handler, MetricsRegistry* metrics)
      : options_(options), handler_(std::move(handler)), acceptor_(asio::make_strand(io_)) {
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
    } else {
      metrics_ = {&local_gauge_, &local_counters_[0], &local_counters_[1], &local_counters_[2],
                  &local_counters_[3]};
    }
  }
  ~HttpServerImpl() override { Stop(); }

  Status Start() override {
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
    const int threads = std::max(1, options_.io_threads);
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
  Gauge local_gauge_;
  Counter local_counters_[4];
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
    : stream_(std::move(socket)), server_(server) {
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
  parser_.emplace();
  parser_->header_limit(static_cast<std::uint32_t>(server_.options().max_header_bytes));
  parser_->body_limit(server_.options().max_body_bytes);
  const int64_t timeout = first_request_ ? server_.options().header_timeout_millis
                                         : server_.options().idle_timeout_millis;
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
  if (auto length = parser_->content_length();
      length && *length > server_.options().max_body_bytes) {
    return FailRequest(413, "payload_too_large_error",
                       "request body of " + std::to_string(*length) + " bytes exceeds the limit of " +
                           std::to_string(server_.options().max_body_bytes));
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
  auto exchange = std::make_shared<HttpExchangeImpl>(shared_from_this(), parser_->release(),
                                                     SystemClock::Get().NowMicros());
  server_.Handle(exchange);
}

void HttpSession::FailRequest(unsigned status, std::string_view type, std::string_view message) {
  waiting_since_micros_ = 0;
  server_.metrics().protocol_errors->Inc();
  server_.RequestStarted();
  HttpResponse r;
  r.status = status;
  r.body = ErrorJson(type, message);
  r.close_connection = true;  // The stream is in an unknown state after a framing error.
  Write(std::move(r), false, 11);
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
    self->stream_.expires_after(
        std::chrono::milliseconds(self->server_.options().write_timeout_millis));
    bhttp::async_write(self->stream_, *res,
                       [self, close](beast::error_code ec, std::size_t) { self->OnWrite(close, ec); });
  });
}

void HttpSession::OnWrite(bool close, beast::error_code ec) {
  pending_.reset();
  server_.RequestFinished();
  if (ec == beast::error::timeout) server_.metrics().timeouts->Inc();
  if (ec || close) return Close();
  ReadHeader();
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
