// FakeExchange: an HttpExchange built in memory for unit tests of the routing and auth
// layers, which never need a socket. It records the response it was given.
//
// Thread-safety: none; one test thread.
#pragma once

#include <optional>
#include <string>
#include <utility>

#include "server/http_server.h"

namespace tailcut {

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
    if (!response_) response_ = std::move(response);
  }
  int64_t received_micros() const override { return received_micros_; }
  std::string_view remote_address() const override { return "127.0.0.1"; }
  CancellationFlag cancellation() const override { return nullptr; }

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
  std::optional<HttpResponse> response_;
};

}  // namespace tailcut
