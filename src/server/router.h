// Router: maps method + path to a handler. Patterns are literal segments and "{name}"
// segments, which match one path segment and land in HttpExchange::params. An unknown path
// is a 404 and a known path with the wrong method a 405 with an Allow header, both with a
// JSON body naming the problem.
//
// Thread-safety: add routes before the server starts; Dispatch() is then safe from any thread.
#pragma once

#include <string>
#include <vector>

#include "common/clock.h"
#include "server/http_server.h"

namespace tailcut {

class Router {
 public:
  // `clock` is the one HttpExchange::received_micros() is read on: the total in the
  // Server-Timing of the 404 and 405 answers is measured on it.
  explicit Router(const Clock& clock = SystemClock::Get()) : clock_(clock) {}

  void Add(std::string method, const std::string& pattern, HttpHandler handler);
  void Dispatch(const HttpExchangePtr& exchange) const;

 private:
  struct Route {
    std::string method;
    std::vector<std::string> segments;  // "{x}" = parameter.
    HttpHandler handler;
  };
  static bool Match(const Route& route, const std::vector<std::string_view>& path,
                    HttpExchange* exchange);
  const Clock& clock_;
  std::vector<Route> routes_;
};

// Splits "/v2/models/x/infer" into {"v2", "models", "x", "infer"}.
std::vector<std::string_view> SplitPath(std::string_view path);

}  // namespace tailcut
