// FakeExchange: an HttpExchange built in memory for unit tests of the routing, auth and API
// layers, which never need a socket. It records the response it was given, or the head and
// pieces of the stream it started (FakeStream).
//
// Thread-safety: FakeStream's methods are safe from any thread (a fake core may play a sink
// on its own thread); the rest is for one test thread.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "server/http_server.h"

namespace tailcut {

// Records what is written to it.
class FakeStream final : public HttpStream {
 public:
  bool Write(std::string piece) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (ended_) return false;
    if (!piece.empty()) pieces_.push_back(std::move(piece));
    return true;
  }
  void Finish() override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!ended_) finished_ = ended_ = true;
  }
  void Abort() override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!ended_) aborted_ = ended_ = true;
  }
  bool closed() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return ended_;
  }
  // Makes the stream act closed, as a client gone away would.
  void Close() {
    std::lock_guard<std::mutex> lock(mutex_);
    ended_ = true;
  }
  std::vector<std::string> pieces() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return pieces_;
  }
  std::string body() const {
    std::string all;
    for (const auto& p : pieces()) all += p;
    return all;
  }
  bool finished() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return finished_;
  }
  bool aborted() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return aborted_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> pieces_;
  bool ended_ = false;
  bool finished_ = false;
  bool aborted_ = false;
};

class FakeExchange final : public HttpExchange {
 public:
  FakeExchange(std::string method, std::string target, int64_t received_micros = 0)
      : received_micros_(received_micros) {
    request_.method_string(method);
    request_.target(target);
    request_.version(11);
  }

  // Adds a request header.
  FakeExchange& With(const std::string& name, const std::string& value) {
    request_.set(name, value);
    return *this;
  }

  const HttpRequest& request() const override { return request_; }
  std::string TakeBody() override { return std::exchange(request_.body(), std::string()); }
  void Respond(HttpResponse response) override {
    if (!response_ && !stream_) response_ = std::move(response);
  }
  HttpStreamPtr StartStream(HttpResponse head) override {
    if (response_ || stream_) return nullptr;
    stream_ = std::make_shared<FakeStream>();
    stream_->Write(std::exchange(head.body, std::string()));
    response_ = std::move(head);  // The head, without its body.
    return stream_;
  }
  int64_t received_micros() const override { return received_micros_; }
  std::string_view remote_address() const override { return "127.0.0.1"; }
  CancellationFlag cancellation() const override { return cancellation_; }

  // Sets the request body.
  FakeExchange& WithBody(std::string body) {
    request_.body() = std::move(body);
    return *this;
  }
  // Cancels the exchange, as a client that went away would.
  void Cancel() { cancellation_->Cancel(); }
  // The stream, if StartStream() was called.
  const std::shared_ptr<FakeStream>& stream() const { return stream_; }

  // The response, if Respond() was called.
  const std::optional<HttpResponse>& response() const { return response_; }
  // An extra header of the response, or empty.
  std::string response_header(const std::string& name) const {
    if (!response_) return {};
    for (const auto& [k, v] : response_->headers) {
      if (k == name) return v;
    }
    return {};
  }

 private:
  HttpRequest request_;
  int64_t received_micros_;
  std::optional<HttpResponse> response_;  // Or the stream's head.
  std::shared_ptr<FakeStream> stream_;
  std::shared_ptr<Cancellation> cancellation_ = std::make_shared<Cancellation>();
};

}  // namespace tailcut
